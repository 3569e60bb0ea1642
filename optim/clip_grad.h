// Clipping by global norm (torch.nn.utils.clip_grad_norm_ with norm_type 2):
// the L2 norm of all gradients as one vector, then every gradient multiplied
// in place by min(1, max_norm / (norm + 1e-6)). Fused and deterministic on
// CUDA (optim/cuda/clip.cu), with no host synchronisation: the norm is
// returned as a device tensor and the coefficient never leaves the device.
// Under fp16 loss scaling, call GradScaler::unscale_ first so the norm is the
// true gradients' norm.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tandem::optim {

// Parameters without a gradient are skipped. Returns the norm before clipping
// as a 0-dim f32 tensor on the gradients' device (0 on the CPU when no
// parameter has a gradient). Gradients must be f32 and on one device.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace tandem::optim
