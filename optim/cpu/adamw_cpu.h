// CPU reference for the fused AdamW step: a plain loop over every tensor of
// the list with the formulas of optim/update_math.h.
#pragma once

#include "optim/tensor_list.h"
#include "optim/update_math.h"

namespace tandem::optim {

// Operands: ptr = {param, grad, exp_avg, exp_avg_sq}, step = the tensor's step count.
// Unless *found_inf is non-zero (found_inf may be null): increments each step
// count, then updates param, exp_avg and exp_avg_sq in place. found_inf is a host pointer.
void adamw_step_cpu(const TensorList& tensors, const AdamWHyper& hyper, const float* found_inf);

}  // namespace tandem::optim
