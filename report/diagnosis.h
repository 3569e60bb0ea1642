// Automatic diagnosis of a DDP run: a pure function from what was measured
// to findings, each naming the configuration keys (the knobs) to change.
//
// Rules (each bound is a field of Thresholds below, the one place its number
// lives; describe_thresholds() spells them for the report):
//   comm-bound      world > 1 and (exposed all-reduce time > comm_exposed_fraction
//                   of the step, or compute/comm < compute_comm_ratio, compute =
//                   forward + backward autograd pass, comm = all-reduce time).
//                   Knobs: ddp_bucket_cap_mb (the bucket sweep's best when it
//                   beats the current size by more than bucket_gain and the
//                   noise), ddp_comm_hook (bf16/fp16 compression halves the
//                   bytes; bf16 autocast does not: gradients stay f32),
//                   gradient_accumulation_steps (no_sync: one all-reduce per k
//                   micro-batches), per_device_train_batch_size, the model size
//                   when the model is small (< small_model_parameters), and
//                   data.vocab_max_size when the token embedding is more than
//                   embedding_share of the gradients (its gradient comes last in
//                   backward, so its all-reduce cannot be hidden).
//   data-bound      waiting for the DataLoader > data_wait_fraction of the step.
//                   Knobs: dataloader_num_workers, dataloader_pin_memory (CUDA).
//   sync points     a logging step costs a host synchronisation: flagged when
//                   the measured extra time, spread over logging_steps, is >
//                   sync_fraction of a step, or (CUDA, not measured)
//                   logging_steps < cuda_min_logging_steps. Checkpoints: one
//                   save's time spread over save_steps > sync_fraction. Knobs:
//                   logging_steps, save_steps (sized to sync_target_fraction).
//   small batch     per_device_train_batch_size < small_batch while comm-bound
//                   or with gradient accumulation. Knobs:
//                   per_device_train_batch_size, gradient_accumulation_steps
//                   (same effective batch).
//   negative        scaling speedup < 1 at the largest world size: more ranks
//   scaling         are slower than one. Poor scaling: efficiency <
//                   poor_efficiency. With the 1-rank profile, the finding says
//                   where the extra step time went (compute, exposed
//                   all-reduce, optimizer, data).
//   oversubscribed  CPU ranks whose threads (compute, loader workers, comm)
//                   outnumber the cores: scaling then measures core sharing.
//   balanced        none of the bottlenecks above.
//   noisy           a measurement note, not a bottleneck: the step time's
//                   p10-p90 spread > noisy_spread of its median, or the
//                   machine's load average at the start >= busy_load of its
//                   cores (others' work).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/profile.h"

namespace tandem::report {

struct Thresholds {
  double comm_exposed_fraction = 0.20;  // exposed all-reduce / step
  double compute_comm_ratio = 1.0;      // compute / all-reduce below this: comm-bound
  double data_wait_fraction = 0.10;     // DataLoader wait / step
  double sync_fraction = 0.05;          // logging or checkpoint time / step, amortised
  double sync_target_fraction = 0.01;   // what the suggested logging_steps / save_steps bring that cost down to
  int64_t cuda_min_logging_steps = 5;   // CUDA without a measurement: logging this often is a sync point
  int64_t small_batch = 32;             // per-device batch below this is "small"
  int64_t small_model_parameters = 10'000'000;
  double embedding_share = 0.5;  // token embedding / all parameters above this: suggest a smaller vocabulary
  double poor_efficiency = 0.70;
  double bucket_gain = 0.03;   // a bucket size must beat the current one by this fraction (and the noise)
  double noisy_spread = 0.30;  // (p90 - p10) / median of the step time
  double busy_load = 0.75;     // load average / cores
};

// The bucket sweep, reduced to what the advice needs.
struct BucketSweepFacts {
  double current_cap_mb = 25;  // the configuration's ddp_bucket_cap_mb
  std::string best_label;      // the fastest case ("5", "one bucket")
  double best_cap_mb = 25;
  double best_step_ms = 0;
  double current_step_ms = 0;  // the current size's median step (0 when it was not swept)
  double noise_ms = 0;         // half the p10-p90 spread of the best case's step time
};

struct ScalingFacts {
  int world_size = 1;  // the largest measured
  double speedup = 1;
  double efficiency = 1;
};

struct DiagnosisInput {
  Profile profile;          // the run to diagnose (normally the largest world size)
  int host_cores = 0;       // CPU cores the ranks share (0: unknown)
  double load_average = 0;  // the machine's 1-minute load average when the run started
  std::optional<ScalingFacts> scaling;
  std::optional<Profile> baseline;  // the 1-rank profile of the scaling bench, if measured
  std::optional<BucketSweepFacts> buckets;
  int64_t max_batch_that_fits = 0;  // from find-batch-size (0: unknown)
};

enum class Finding {
  CommBound,
  DataBound,
  SyncPoints,
  SmallBatch,
  NegativeScaling,
  PoorScaling,
  Oversubscribed,
  Balanced,
  Noisy
};
const char* finding_name(Finding f);  // "comm-bound", "data-bound", ...

struct Suggestion {
  std::string knob;   // a config key (ddp_bucket_cap_mb, model.d_model, ...)
  std::string value;  // a suggested value, or "" when the direction is the advice
  std::string why;
};

struct Advice {
  Finding finding;
  std::string summary;  // one sentence with the measured numbers
  std::vector<Suggestion> suggestions;
};

// Derived ratios, also printed in the report.
double exposed_comm_fraction(const Profile& p);
double compute_comm_ratio(const Profile& p);  // +inf when there is no communication
double data_wait_fraction(const Profile& p);
// All-reduce time that ran during the autograd pass / all-reduce time; NaN when there was none.
double overlap_fraction(const Profile& p);

std::vector<Advice> diagnose(const DiagnosisInput& input, const Thresholds& t = {});

// The advice as text: one paragraph per finding, one line per suggestion.
std::string format_advice(const std::vector<Advice>& advice);

// The thresholds as one paragraph for the report ("Thresholds (report/diagnosis.h):
// comm-bound when exposed all-reduce > 20% of the step ..."), every number read from `t`.
std::string describe_thresholds(const Thresholds& t);

}  // namespace tandem::report
