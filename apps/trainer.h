// The training loop behind `tandem train`.
//
// One Trainer per rank: it reads the data, builds the tokenizer (every rank
// builds the same one from the training split; rank 0 saves it), the model,
// DistributedDataParallel when there is more than one rank, the optimizer,
// the schedule and the loss scaler, then trains for the configured epochs or
// steps. Gradient accumulation uses no_sync on all but the last micro-step; the
// loss is read back to the host only on logging steps. Rank 0 evaluates,
// writes metrics (JSONL and CSV), checkpoints and the resolved config. Each
// step is timed phase by phase (TrainProfiler, docs/profiling.md): the phase
// times join the metrics, and profile_steps / trace add per-rank profiles
// and a timeline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/train_config.h"
#include "comm/process_group.h"
#include "data/data_loader.h"
#include "nn/transformer.h"

namespace tandem::apps {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  std::vector<double> per_class_accuracy;
  int64_t examples = 0;
};

struct TrainResult {
  int64_t steps = 0;
  double train_loss = 0;  // mean over the last logging window
  EvalResult eval;
  double majority_baseline = 0;  // accuracy of always predicting the most frequent test class
  std::vector<std::string> class_names;
  double seconds = 0;
  double samples_per_second = 0;  // this rank's training samples / training time, times world size
  // A 64-bit hash of every rank's final parameters (rank order): DDP keeps them
  // identical, so the entries must all be equal.
  std::vector<int64_t> weight_checksums;
  bool stopped_early = false;  // --stop-after ended the run before its last step
};

struct TrainerOptions {
  std::string resume;  // "" (fresh start), "latest", or a checkpoint folder
  bool quiet = false;  // no progress output (tests)
  // > 0: stop after this many optimizer steps of this run, saving a checkpoint
  // that --resume continues from (for jobs with a time limit).
  int64_t stop_after_steps = 0;
};

// Loss, accuracy and per-class accuracy of `model` (eval mode, no grad) over
// one pass of `loader`.
EvalResult evaluate(const nn::TextClassifier& model, data::DataLoader& loader, DType compute, int64_t num_classes);

// Runs a whole training job on this rank. `group` is null for a single process.
TrainResult train(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group,
                  const TrainerOptions& options = {});

}  // namespace tandem::apps
