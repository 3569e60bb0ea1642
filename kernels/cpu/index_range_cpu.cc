#include "kernels/cpu/index_range_cpu.h"

#include "core/check.h"

namespace tandem::kernels {

int64_t first_out_of_range_cpu(const void* indices, DType t, int64_t n, int64_t limit) {
  TANDEM_CHECK(t == DType::I32 || t == DType::I64, "indices must be i32 or i64, got {}", dtype_name(t));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = index_at(indices, t, i);
    if (v < 0 || v >= limit) return i;
  }
  return -1;
}

}  // namespace tandem::kernels
