// What a benchmark measured about training steps, in the form every other
// piece reads: the bench commands write it (as JSON, bench_files.h), the
// report plots and tabulates it, and diagnosis.h turns it into advice.
//
// A StepSample is one optimizer step on one rank. A Profile is one measured
// case (a bucket size, a world size, a precision) over all ranks: per step,
// the step time is the slowest rank's (a DDP step ends when its last rank
// does) and the other phases are the mean over ranks; the profile holds the
// medians of those over the timed steps, plus what was measured (RunFacts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/stats.h"

namespace tandem::report {

// One optimizer step on one rank, milliseconds of host wall time. With
// gradient accumulation the per-micro-step phases are summed.
struct StepSample {
  double step_ms = 0;              // the whole step, data included
  double data_wait_ms = 0;         // blocked waiting for the DataLoader
  double forward_ms = 0;           // forward pass and loss
  double backward_ms = 0;          // loss.backward(), including the wait for the last all-reduce
  double backward_compute_ms = 0;  // the autograd pass alone
  double comm_ms = 0;              // first bucket's all-reduce start to the last one's end
  double exposed_comm_ms = 0;      // all-reduce time after the autograd pass ended (not hidden)
  double overlap_ms = 0;           // all-reduce time that ran during the autograd pass
  double optimizer_ms = 0;         // unscale, clip, step, zero_grad
  double sync_ms = 0;              // reading the loss on a logging step (a host synchronisation)
  bool logging_step = false;
  // When each gradient became ready (DDP's hook fired), ms from the start of backward, indexed as
  // RunFacts::gradient_names; empty without DDP (one rank).
  std::vector<double> gradient_ready_ms;
  // DDP's buckets in launch order (RunFacts::bucket_bytes), ms from the start of backward: when each was
  // ready, and when the backend started and finished reducing it (ddp::BucketStats). Empty without DDP.
  std::vector<double> bucket_ready_ms, bucket_comm_start_ms, bucket_comm_end_ms;
};

// The configuration a profile was measured with.
struct RunFacts {
  std::string label;   // the case: "25", "one bucket", "2 ranks", "bf16"
  std::string config;  // the YAML file, and the overrides applied
  std::vector<std::string> overrides;
  std::string device = "cpu";    // cpu | cuda
  std::string backend = "none";  // ring | nccl | none (one rank)
  int world_size = 1;
  int64_t per_device_batch = 0;
  int64_t gradient_accumulation_steps = 1;
  int64_t seq_len = 0;  // model.max_seq_len: every batch's length with padding max_length, the cap with longest
  std::string padding = "max_length";  // data.padding: max_length | longest
  int64_t pad_to_multiple_of = 1;      // data.pad_to_multiple_of (longest)
  int64_t logging_steps = 0;
  int64_t save_steps = 0;
  int64_t dataloader_num_workers = 0;
  bool dataloader_pin_memory = false;
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  std::string comm_hook = "allreduce";
  double bucket_cap_mb = 25;
  bool one_bucket = false;            // every gradient in one bucket (first bucket included)
  std::vector<int64_t> bucket_bytes;  // DDP's buckets in launch order (empty on one rank)
  // Every gradient DDP reduced, in the order they became ready in the first timed step, and their
  // bytes (empty on one rank): with the ready times, what re-forms buckets for any cap (ddp/step_model.h).
  std::vector<std::string> gradient_names;
  std::vector<int64_t> gradient_bytes;
  int64_t num_parameters = 0;
  int64_t vocab_size = 0;  // the token embedding is vocab_size x d_model of the parameters
  int64_t d_model = 0;
  int64_t train_examples = 0;  // examples in one epoch (all ranks)
  bool synthetic_data = false;
  double synthetic_real_fraction = 1.0;  // synthetic rows' mean real share (train::StepRunnerOptions)

  int64_t samples_per_step() const { return per_device_batch * gradient_accumulation_steps * world_size; }
  double gradient_mb() const { return static_cast<double>(num_parameters) * 4.0 / (1 << 20); }
  double embedding_share() const {
    return num_parameters > 0 ? static_cast<double>(vocab_size * d_model) / static_cast<double>(num_parameters) : 0;
  }
  // "real", "synthetic full-length" or "synthetic (about 25 % real tokens, the rest padding)": the
  // data a run measured, for the benches' summary lines.
  std::string data_description() const;
  // "of 256 tokens" or "padded to each batch's longest row (a multiple of 8, at most 256 tokens)".
  std::string length_description() const;
};

struct Profile {
  RunFacts facts;
  int warmup_steps = 0;
  // Medians over timed steps (see the file comment for how ranks combine).
  StepSample median;
  Summary step_ms;                // spread of the step time
  double samples_per_second = 0;  // all ranks: samples_per_step / median step time
  int64_t peak_memory_bytes = 0;  // the largest rank's peak tensor memory (device memory on CUDA)
  // Extra time of a logging step over a plain one (median difference); < 0 when
  // fewer than 3 logging steps were timed.
  double logging_overhead_ms = -1;
  double checkpoint_ms = -1;            // one checkpoint save on rank 0; < 0 when not measured
  std::vector<double> step_samples_ms;  // every timed step (slowest rank), for plots
  // Per gradient (facts.gradient_names) and per bucket (facts.bucket_bytes): the median over timed
  // steps of the ranks' mean, as in StepSample.
  std::vector<double> gradient_ready_ms;
  std::vector<double> bucket_ready_ms, bucket_comm_start_ms, bucket_comm_end_ms;

  double compute_ms() const { return median.forward_ms + median.backward_compute_ms; }
  // The part of the step in none of the named phases (logging, glue, the loader hand-off); never negative.
  double other_ms() const {
    const double rest =
        median.step_ms - median.data_wait_ms - median.forward_ms - median.backward_ms - median.optimizer_ms;
    return rest > 0 ? rest : 0.0;
  }
  // Estimated epoch time from the throughput (epoch examples / samples per second).
  double epoch_seconds() const {
    return samples_per_second > 0 ? static_cast<double>(facts.train_examples) / samples_per_second : 0;
  }
};

// Combines each rank's samples of one case (per_rank[r][i] is step i on rank r;
// every rank timed the same number of steps) into a Profile.
Profile aggregate(const RunFacts& facts, const std::vector<std::vector<StepSample>>& per_rank, int warmup_steps,
                  const std::vector<int64_t>& peak_memory_per_rank, double checkpoint_ms);

// A scaling table row: throughput relative to the smallest world size measured.
struct ScalingRow {
  int world_size = 1;
  double samples_per_second = 0;
  double speedup = 0;     // samples_per_second / the 1-rank samples_per_second (T1 / TN per sample)
  double efficiency = 0;  // speedup / world_size
  double step_ms = 0;
  double epoch_seconds = 0;
};
// Rows sorted by world size. The reference is the 1-rank profile; without one,
// the smallest world size w0 stands in, scaled as if it were perfect (speedup w0).
std::vector<ScalingRow> scaling_table(const std::vector<Profile>& profiles);

}  // namespace tandem::report
