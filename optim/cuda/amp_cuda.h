// Loss-scaling kernels on CUDA; same contracts as optim/cpu/amp_cpu.h with
// device pointers, queued on `stream`: nothing here synchronises with the host.
#pragma once

#include <cstdint>

#include "optim/tensor_list.h"

namespace tandem::optim {

void unscale_and_check_cuda(const TensorList& grads, const float* scale, float* found_inf, void* stream);
void update_scale_cuda(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval, void* stream);

}  // namespace tandem::optim
