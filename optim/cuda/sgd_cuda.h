// Fused SGD on CUDA; same contract as optim/cpu/sgd_cpu.h, except that
// found_inf is a device pointer (or null). Queued on `stream`.
#pragma once

#include "optim/tensor_list.h"
#include "optim/update_math.h"

namespace tandem::optim {

void sgd_step_cuda(const TensorList& tensors, const SgdHyper& hyper, const float* found_inf, void* stream);

}  // namespace tandem::optim
