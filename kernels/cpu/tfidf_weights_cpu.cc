#include "kernels/cpu/tfidf_weights_cpu.h"

#include <cmath>

#include "core/check.h"
#include "kernels/cpu/index_range_cpu.h"

namespace tandem::kernels {

namespace {

template <class T>
void rows(const void* ids, DType ids_dtype, const uint8_t* mask, const T* idf, T* w, int64_t batch, int64_t seq,
          bool sublinear_tf) {
  for (int64_t b = 0; b < batch; ++b) {
    T squares = 0;
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t i = b * seq + s;
      T v = 0;
      if (mask[i] != 0) {
        const T count = static_cast<T>(mask[i]);
        v = (sublinear_tf ? T(1) + std::log(count) : count) * idf[index_at(ids, ids_dtype, i)];
      }
      w[i] = v;
      squares += v * v;
    }
    const T scale = squares > 0 ? T(1) / std::sqrt(squares) : T(0);
    for (int64_t s = 0; s < seq; ++s) w[b * seq + s] *= scale;
  }
}

}  // namespace

void tfidf_weights_cpu(const void* ids, DType ids_dtype, const uint8_t* mask, const void* idf, void* w, DType t,
                       int64_t batch, int64_t seq, bool sublinear_tf) {
  if (t == DType::F64) {
    rows(ids, ids_dtype, mask, static_cast<const double*>(idf), static_cast<double*>(w), batch, seq, sublinear_tf);
    return;
  }
  TANDEM_CHECK(t == DType::F32, "tfidf_weights_cpu: idf must be f32 or f64, got {}", dtype_name(t));
  rows(ids, ids_dtype, mask, static_cast<const float*>(idf), static_cast<float*>(w), batch, seq, sublinear_tf);
}

}  // namespace tandem::kernels
