// The phases of one training step, as the step profiler names them.
//
//   data_wait         the host blocked in DataLoader::next() for the batch
//   h2d               the batch's host-to-device copy on the loader's copy
//                     stream (GPU only: on the CPU the batch is never copied)
//   forward           the forward pass and the loss
//   backward_compute  the autograd pass (with DDP: until the last gradient is
//                     ready and its bucket launched)
//   comm_wait         exposed communication: from the end of the autograd pass
//                     until every bucket's all-reduce is done and the
//                     averaged gradients are in place
//   optimizer         unscale, clip, the optimizer step, the LR schedule and
//                     zero_grad
//   logging           a logging step's loss read-back (its one host
//                     synchronisation) and the line it prints
//
// With gradient accumulation a step has several micro-steps; their data_wait,
// forward and backward_compute add up into the step's.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace tandem::profile {

enum class Phase : int { DataWait, H2D, Forward, BackwardCompute, CommWait, Optimizer, Logging };
inline constexpr size_t kNumPhases = 7;

inline constexpr std::array<Phase, kNumPhases> kAllPhases = {
    Phase::DataWait, Phase::H2D,       Phase::Forward, Phase::BackwardCompute,
    Phase::CommWait, Phase::Optimizer, Phase::Logging};

// "data_wait", "h2d", "forward", "backward_compute", "comm_wait", "optimizer", "logging".
std::string_view phase_name(Phase phase);
std::optional<Phase> parse_phase(std::string_view name);
inline size_t index_of(Phase phase) { return static_cast<size_t>(phase); }

// Phases whose time is the GPU's (CUDA events) when the model runs on a GPU;
// the others are always the host's (steady_clock).
bool is_device_phase(Phase phase);

}  // namespace tandem::profile
