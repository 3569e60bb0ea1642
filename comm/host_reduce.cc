#include "comm/host_reduce.h"

#include "core/element.h"

namespace tandem::comm {

namespace {

// `d` may alias `a` (in place); `b` is always a separate buffer.
template <class T>
void sum(T* d, const T* a, const T* __restrict b, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    for (int64_t i = 0; i < n; ++i) d[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(a[i] + b[i]);
  }
}

template <class T>
void max(T* d, const T* a, const T* __restrict b, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    for (int64_t i = 0; i < n; ++i) d[i] = a[i] > b[i] ? a[i] : b[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    auto x = load(a[i]);
    auto y = load(b[i]);
    d[i] = (x != x || !(y != y || y > x)) ? a[i] : b[i];  // NaN wins, from either side
  }
}

template <class T>
void divide(T* d, int64_t n, int divisor) {
  if constexpr (std::is_integral_v<T>) {
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / divisor);
  } else {
    using A = acc_t<T>;
    const A k = static_cast<A>(divisor);
    for (int64_t i = 0; i < n; ++i) d[i] = store<T>(load(d[i]) / k);
  }
}

}  // namespace

void host_reduce(void* dst, const void* a, const void* b, DType dtype, int64_t n, ReduceOp op) {
  TANDEM_DISPATCH_ALL(dtype, "host_reduce", [&] {
    auto* d = static_cast<scalar_t*>(dst);
    auto* x = static_cast<const scalar_t*>(a);
    auto* y = static_cast<const scalar_t*>(b);
    if (op == ReduceOp::Max) max(d, x, y, n);
    else sum(d, x, y, n);
  });
}

void host_divide(void* dst, DType dtype, int64_t n, int divisor) {
  if (divisor == 1) return;
  TANDEM_DISPATCH_ALL(dtype, "host_divide", [&] { divide(static_cast<scalar_t*>(dst), n, divisor); });
}

}  // namespace tandem::comm
