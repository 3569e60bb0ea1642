// CPU reference for clipping by global norm: the L2 norm of all gradients as
// one vector (sum of squares accumulated in f64, in fixed blocks so that the
// bits do not depend on the thread count; it is the more accurate
// side of the CUDA parity test), then every gradient scaled by
// min(1, max_norm / (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_).
#pragma once

#include "optim/tensor_list.h"

namespace tandem::optim {

// Operands: ptr = {grad}. Writes the norm before clipping to *total_norm (host pointer).
void clip_grad_norm_cpu(const TensorList& grads, double max_norm, float* total_norm);

}  // namespace tandem::optim
