// CUDA step counters of the fused optimizers: one tiny launch per few hundred
// tensors that adds 1 to each tensor's f32 step count unless *found_inf is
// non-zero. It runs before the update launches, which then read the new count
// (it cannot be folded into them: every block of a tensor reads the count).
#pragma once

#include "optim/tensor_list.h"

namespace tandem::optim {

// Increments *entry.step for every entry of `tensors`; found_inf may be null.
void increment_steps_cuda(const TensorList& tensors, const float* found_inf, void* stream);

}  // namespace tandem::optim
