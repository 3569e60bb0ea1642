// Timed training steps for the benchmarks: the trainer's model, data, DDP
// and optimizer (train/setup.h), run step by step with a timestamp
// around every phase, instead of the trainer's loop.
//
// One StepRunner per rank. Each run() takes a StepCase (bucket size,
// precision, comm hook), rebuilds DDP with it (every rank must run the same
// cases in the same order: DDP's construction is collective), runs untimed
// warm-up steps (the first of which rebuilds the buckets in gradient-ready
// order), then the timed steps. Every rank returns its own samples; the parent
// combines them (report::aggregate).
//
// What differs from `tandem train`: the learning rate stays constant (no
// schedule: it does not change the work), nothing is evaluated or saved, and
// on CUDA the host waits for the device at the end of every step so that a
// step's time is the device's.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "train/config.h"
#include "comm/process_group.h"
#include "profile/op_profile.h"
#include "report/profile.h"

namespace tandem::train {

struct StepCase {
  std::string label;
  double bucket_cap_mb = 25;
  bool one_bucket = false;         // one bucket for every gradient (the first bucket too)
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  std::string comm_hook = "allreduce";
};

// The case a config describes by itself.
StepCase config_case(const TrainConfig& config, const std::string& label);

struct StepRunnerOptions {
  // Random full-length sequences (vocab data.vocab_max_size, 4 classes) instead
  // of the config's dataset: no data files needed, and the worst case for memory.
  bool synthetic = false;
  // With `synthetic`: the share of each row's tokens that are real, the rest padding (masked), as a
  // dataset's texts padded to max_seq_len. Row lengths are uniform in [1, 2 ceil(F S) - 1] capped
  // at S (a mean of about F S), fixed per example. 1: every row full length. In (0, 1].
  double synthetic_real_fraction = 1.0;
  // Observes the ops of every timed step (profile/op_profile.h), not the warm-up's; null: none.
  profile::OpProfile* ops = nullptr;
};

class StepRunner {
 public:
  // `group` is null for one process. Builds data, tokenizer, model and optimizer.
  StepRunner(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group, StepRunnerOptions options = {});
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  std::vector<report::StepSample> run(const StepCase& c, int warmup, int steps);
  // What the last run() measured with (its buckets included).
  report::RunFacts facts(const StepCase& c) const;
  // Peak tensor memory during the last run()'s timed steps (device memory on CUDA).
  int64_t peak_memory_bytes() const { return peak_memory_; }
  // Time of one checkpoint save (model, optimizer, state) into a scratch folder under `dir`, removed after.
  double time_checkpoint_ms(const std::filesystem::path& dir);

 private:
  struct State;
  std::unique_ptr<State> s_;
  int64_t peak_memory_ = 0;
};

}  // namespace tandem::train
