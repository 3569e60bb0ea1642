#include "optim/cpu/sgd_cpu.h"

#include <type_traits>

#include "optim/cpu/simd_clones.h"

namespace tandem::optim {

TANDEM_SIMD_CLONES void sgd_step_cpu(const TensorList& tensors, const SgdHyper& hyper, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  const SgdScalars s = sgd_scalars(hyper);
  // One loop per (momentum, first step) case, so each is a straight line the compiler vectorises.
  auto loop = [&s](const TensorListEntry& e, auto momentum, auto first) {
    float* p = e.ptr[0];
    const float* g = e.ptr[1];
    float* buf = e.ptr[2];
    for (int64_t i = 0; i < e.numel; ++i) {
      float b = 0.0f;
      if constexpr (momentum) b = buf[i];
      sgd_update(p[i], g[i], b, momentum, first, s);
      if constexpr (momentum) buf[i] = b;
    }
  };
  using Yes = std::true_type;
  using No = std::false_type;
  for (const TensorListEntry& e : tensors) {
    if (hyper.momentum == 0.0) {
      loop(e, No{}, No{});
      continue;
    }
    *e.step += 1.0f;
    if (*e.step == 1.0f) loop(e, Yes{}, Yes{});
    else loop(e, Yes{}, No{});
  }
}

}  // namespace tandem::optim
