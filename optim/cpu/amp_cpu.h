// CPU reference for loss-scaling bookkeeping: the fused unscale + inf/nan
// check of gradients, and the scale update (torch.amp semantics, see
// optim/update_math.h). All pointers are host pointers.
#pragma once

#include <cstdint>

#include "optim/tensor_list.h"

namespace tandem::optim {

// Operands: ptr = {grad}. Multiplies every gradient by float(1 / double(*scale))
// and sets *found_inf = 1 if any element (before scaling) is inf or nan;
// never clears found_inf.
void unscale_and_check_cpu(const TensorList& grads, const float* scale, float* found_inf);

// One GradScaler.update(): backoff on *found_inf, growth after growth_interval clean steps.
void update_scale_cpu(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                      double backoff_factor, int64_t growth_interval);

}  // namespace tandem::optim
