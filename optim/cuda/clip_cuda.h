// Clipping by global norm on CUDA; same contract as optim/cpu/clip_cpu.h with
// device pointers (total_norm is a device f32), queued on `stream` of `device`.
#pragma once

#include "optim/tensor_list.h"

namespace tandem::optim {

void clip_grad_norm_cuda(const TensorList& grads, double max_norm, float* total_norm, int device, void* stream);

}  // namespace tandem::optim
