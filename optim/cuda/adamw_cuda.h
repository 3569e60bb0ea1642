// Fused AdamW on CUDA; same contract as optim/cpu/adamw_cpu.h, except that
// found_inf is a device pointer (or null), read by the kernels, so a skipped
// step needs no host synchronisation. Queued on `stream` (a cudaStream_t).
#pragma once

#include "optim/tensor_list.h"
#include "optim/update_math.h"

namespace tandem::optim {

void adamw_step_cuda(const TensorList& tensors, const AdamWHyper& hyper, const float* found_inf, void* stream);

}  // namespace tandem::optim
