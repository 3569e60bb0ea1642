#include "optim/cpu/sgd_cpu.h"

namespace tandem {

void sgd_step_cpu(const TensorList& tensors, const SgdHyper& hyper, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  const SgdScalars s = sgd_scalars(hyper);
  const bool use_momentum = hyper.momentum != 0.0;
  for (const TensorListEntry& e : tensors) {
    bool first = false;
    if (use_momentum) {
      *e.step += 1.0f;
      first = *e.step == 1.0f;
    }
    float* p = e.ptr[0];
    const float* g = e.ptr[1];
    float* buf = e.ptr[2];
    float unused = 0.0f;
    for (int64_t i = 0; i < e.numel; ++i) sgd_update(p[i], g[i], use_momentum ? buf[i] : unused, use_momentum, first, s);
  }
}

}  // namespace tandem
