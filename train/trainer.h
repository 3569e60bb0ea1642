// A whole training job, as `tandem train` runs it on each rank.
//
// train() reads the data, builds the tokenizer (every rank builds the same one
// from the training split; rank 0 saves it), the model, DistributedDataParallel
// when there is more than one rank, the optimizer, the schedule and the loss
// scaler (train/setup.h), then runs TrainStep (train/step.h) for the configured
// epochs or steps. The loss is read back to the host only on logging steps.
// Rank 0 evaluates (train/evaluation.h), writes metrics (train/metrics_writer.h),
// checkpoints and the resolved config, and prints progress. Each step is timed
// phase by phase (TrainProfiler, docs/profiling.md): the phase times join the
// metrics, and profile_steps / trace add per-rank profiles and a timeline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "train/config.h"
#include "comm/process_group.h"
#include "train/evaluation.h"

namespace tandem::train {

struct TrainResult {
  int64_t steps = 0;
  double train_loss = 0;  // mean over the last logging window
  EvalResult eval;
  double majority_baseline = 0;  // accuracy of always predicting the most frequent test class
  std::vector<std::string> class_names;
  std::vector<double> class_weights;  // of the training loss, per class; empty: unweighted
  int64_t optimizer_state_bytes = 0;  // this rank's optimizer state (with zero_stage 1: its shard's)
  // ddp_comm_hook powersgd: gradient elements handed to the hook and elements it all-reduced, on this rank.
  int64_t comm_hook_numel_before = 0, comm_hook_numel_after = 0;
  double seconds = 0;
  double samples_per_second = 0;  // this rank's training samples / training time, times world size
  // A 64-bit hash of every rank's final parameters (rank order): DDP keeps them
  // identical, so the entries must all be equal.
  std::vector<int64_t> weight_checksums;
  bool stopped_early = false;  // --stop-after ended the run before its last step
  bool early_stopped = false;  // early stopping ended it (early_stopping_patience)
  // With load_best_model_at_end or early stopping: the best evaluation's step and metric
  // (on the validation split, if there is one). With load_best_model_at_end, `eval` is that model's.
  int64_t best_step = -1;
  double best_metric = 0;
  std::string metric_for_best_model;
};

struct TrainerOptions {
  std::string resume;  // "" (fresh start), "latest", or a checkpoint folder
  bool quiet = false;  // no progress output (tests)
  // > 0: stop after this many optimizer steps of this run, saving a checkpoint
  // that --resume continues from (for jobs with a time limit).
  int64_t stop_after_steps = 0;
};

// Runs a whole training job on this rank. `group` is null for a single process.
TrainResult train(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group,
                  const TrainerOptions& options = {});

}  // namespace tandem::train
