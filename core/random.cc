#include "core/random.h"

#include "core/element.h"
#include "core/random_element.h"

namespace tandem {

void fill_uniform(Tensor& t, uint64_t seed, uint64_t subsequence, double low, double high) {
  TANDEM_CHECK(is_floating(t.dtype()), "fill_uniform: {} is not a floating tensor", t.str());
  t.bump_version();
  const int64_t n = t.numel();
  if (t.device().is_cuda()) {
#if TANDEM_WITH_CUDA
    fill_uniform_cuda(t.data_ptr(), t.dtype(), n, seed, subsequence, static_cast<float>(low),
                      static_cast<float>(high), cuda::current_stream(t.device().index).handle());
#endif
    return;
  }
  TANDEM_DISPATCH_FLOAT(t.dtype(), "fill_uniform", [&] {
    auto* d = static_cast<scalar_t*>(t.data_ptr());
    for (int64_t i = 0; i < n; ++i)
      d[i] = from_float<scalar_t>(uniform_element(seed, subsequence, static_cast<uint64_t>(i),
                                                  static_cast<float>(low), static_cast<float>(high)));
  });
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t subsequence, double mean, double stddev) {
  TANDEM_CHECK(is_floating(t.dtype()), "fill_normal: {} is not a floating tensor", t.str());
  t.bump_version();
  const int64_t n = t.numel();
  if (t.device().is_cuda()) {
#if TANDEM_WITH_CUDA
    fill_normal_cuda(t.data_ptr(), t.dtype(), n, seed, subsequence, static_cast<float>(mean),
                     static_cast<float>(stddev), cuda::current_stream(t.device().index).handle());
#endif
    return;
  }
  TANDEM_DISPATCH_FLOAT(t.dtype(), "fill_normal", [&] {
    auto* d = static_cast<scalar_t*>(t.data_ptr());
    for (int64_t i = 0; i < n; ++i)
      d[i] = from_float<scalar_t>(normal_element(seed, subsequence, static_cast<uint64_t>(i),
                                                 static_cast<float>(mean), static_cast<float>(stddev)));
  });
}

}  // namespace tandem
