#include "optim/cpu/adamw_cpu.h"
#include "optim/cpu/simd_clones.h"

namespace tandem::optim {

TANDEM_SIMD_CLONES void adamw_step_cpu(const TensorList& tensors, const AdamWHyper& hyper, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  for (const TensorListEntry& e : tensors) {
    *e.step += 1.0f;
    const AdamWScalars s = adamw_scalars(hyper, *e.step);
    float* p = e.ptr[0];
    const float* g = e.ptr[1];
    float* m = e.ptr[2];
    float* v = e.ptr[3];
    for (int64_t i = 0; i < e.numel; ++i) adamw_update(p[i], g[i], m[i], v[i], s);
  }
}

}  // namespace tandem::optim
