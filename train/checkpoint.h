// Training checkpoints: one folder per optimizer step,
//   <output_dir>/checkpoint-<step>/
//     model.safetensors       the model's state dict (loadable by PyTorch's safetensors)
//     optimizer.safetensors   the optimizer's state (PyTorch's names: state.<i>.exp_avg, ...)
//     trainer_state.json      step, epoch, sampler position, loss scaler, seed, class names
//     config.yaml, vocab.txt  what is needed to rebuild the model and its tokenizer
//                             (tokenizer.json instead of vocab.txt for a BPE tokenizer)
// A checkpoint is written into a hidden temporary folder and renamed into
// place, so a crash mid-write leaves the previous checkpoints intact and
// loadable (latest_checkpoint ignores unfinished ones). save_total_limit keeps
// only the newest checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/atomic_file.h"  // write_file_atomically, which the trainer uses with checkpoints
#include "core/safetensors.h"
#include "data/distributed_sampler.h"
#include "optim/grad_scaler.h"

namespace tandem::train {

struct TrainerState {
  int64_t global_step = 0;  // optimizer steps taken
  int64_t epoch = 0;        // the epoch in progress
  data::SamplerState sampler;  // samples of `epoch` already consumed (per rank)
  std::optional<optim::GradScaler::State> scaler;
  int64_t seed = 0;
  int64_t world_size = 1;
  std::vector<std::string> class_names;  // label i is class_names[i]
};

struct Checkpoint {
  NamedTensors model;
  NamedTensors optimizer;
  TrainerState state;
  std::filesystem::path dir;
};

// Writes checkpoint-<state.global_step> under output_dir and applies save_total_limit (<= 0: keep all).
std::filesystem::path save_checkpoint(const std::filesystem::path& output_dir, const NamedTensors& model,
                                      const NamedTensors& optimizer, const TrainerState& state,
                                      const std::string& config_yaml, const std::filesystem::path& vocab_file,
                                      int64_t save_total_limit);
Checkpoint load_checkpoint(const std::filesystem::path& dir);
// The finished checkpoint with the highest step under output_dir, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& output_dir);


}  // namespace tandem::train
