// CPU reference for the fused SGD step (momentum, dampening, Nesterov, weight
// decay): a plain loop with the formulas of optim/update_math.h.
#pragma once

#include "optim/tensor_list.h"
#include "optim/update_math.h"

namespace tandem::optim {

// Operands: ptr = {param, grad, momentum_buffer}; with hyper.momentum == 0 the
// buffer and step slots are unused (may be null). With momentum, step counts
// the tensor's steps: the step that makes it 1 initialises the buffer to the
// gradient, as PyTorch does when the buffer is None. Nothing changes where
// *found_inf is non-zero (found_inf may be null; a host pointer).
void sgd_step_cpu(const TensorList& tensors, const SgdHyper& hyper, const float* found_inf);

}  // namespace tandem::optim
