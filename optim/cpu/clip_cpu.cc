#include "optim/cpu/clip_cpu.h"

#include <cmath>

#include "optim/update_math.h"

namespace tandem::optim {

void clip_grad_norm_cpu(const TensorList& grads, double max_norm, float* total_norm) {
  double sum_sq = 0.0;
  for (const TensorListEntry& e : grads)
    for (int64_t i = 0; i < e.numel; ++i) sum_sq += static_cast<double>(e.ptr[0][i]) * e.ptr[0][i];
  const float norm = static_cast<float>(std::sqrt(sum_sq));
  const float coef = clip_coefficient(norm, max_norm);
  for (const TensorListEntry& e : grads)
    for (int64_t i = 0; i < e.numel; ++i) e.ptr[0][i] *= coef;
  *total_norm = norm;
}

}  // namespace tandem::optim
