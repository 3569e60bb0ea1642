#include "optim/cpu/amp_cpu.h"

#include "optim/update_math.h"

namespace tandem::optim {

void unscale_and_check_cpu(const TensorList& grads, const float* scale, float* found_inf) {
  const float inv = inverse_scale(*scale);
  bool nonfinite = false;
  for (const TensorListEntry& e : grads) {
    float* g = e.ptr[0];
    for (int64_t i = 0; i < e.numel; ++i) g[i] = unscale_and_check(g[i], inv, nonfinite);
  }
  if (nonfinite) *found_inf = 1.0f;
}

void update_scale_cpu(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                      double backoff_factor, int64_t growth_interval) {
  update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace tandem::optim
