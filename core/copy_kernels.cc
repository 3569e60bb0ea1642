#include "core/copy_kernels.h"

#include <cstring>

#include "core/element.h"

namespace tandem {

void convert_host(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  if (n == 0) return;  // empty tensors may have null data; memcpy(nullptr, nullptr, 0) is undefined
  if (src_type == dst_type) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(src_type));
    return;
  }
  TANDEM_DISPATCH_ALL(src_type, "convert", [&] {
    using S = scalar_t;
    const S* s = static_cast<const S*>(src);
    TANDEM_DISPATCH_ALL(dst_type, "convert", [&] {
      using D = scalar_t;
      D* d = static_cast<D*>(dst);
      constexpr bool via_float = std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (via_float) d[i] = from_float<D>(to_float(s[i]));
        else d[i] = from_double<D>(to_double(s[i]));
      }
    });
  });
}

void fill_host(void* dst, DType type, int64_t n, double value) {
  TANDEM_DISPATCH_ALL(type, "fill", [&] {
    scalar_t v = from_double<scalar_t>(value);
    scalar_t* d = static_cast<scalar_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

void accumulate_host(void* dst, const void* src, DType type, int64_t n) {
  TANDEM_DISPATCH_FLOAT(type, "accumulate", [&] {
    scalar_t* d = static_cast<scalar_t*>(dst);
    const scalar_t* s = static_cast<const scalar_t*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = store<scalar_t>(load(d[i]) + load(s[i]));
  });
}

}  // namespace tandem
