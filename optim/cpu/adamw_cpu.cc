#include "optim/cpu/adamw_cpu.h"

#include "core/thread_pool.h"
#include "optim/cpu/simd_clones.h"

namespace tandem::optim {

namespace {

// Elements per task of the thread pool: each element's update is independent
// of the others, so the bits do not depend on how the range is split.
constexpr int64_t kGrain = 1 << 15;

TANDEM_SIMD_CLONES void adamw_range(float* p, const float* g, float* m, float* v, const AdamWScalars s, int64_t lo,
                                    int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) adamw_update(p[i], g[i], m[i], v[i], s);
}

}  // namespace

void adamw_step_cpu(const TensorList& tensors, const AdamWHyper& hyper, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  for (const TensorListEntry& e : tensors) {
    *e.step += 1.0f;
    const AdamWScalars s = adamw_scalars(hyper, *e.step);
    float* p = e.ptr[0];
    const float* g = e.ptr[1];
    float* m = e.ptr[2];
    float* v = e.ptr[3];
    parallel_for(0, e.numel, kGrain, [&](int64_t lo, int64_t hi) { adamw_range(p, g, m, v, s, lo, hi); });
  }
}

}  // namespace tandem::optim
