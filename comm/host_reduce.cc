#include "comm/host_reduce.h"

#include "core/element.h"

namespace tandem::comm {

namespace {

template <class T>
void sum(T* __restrict d, const T* __restrict s, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    for (int64_t i = 0; i < n; ++i) d[i] = from_float<T>(to_float(d[i]) + to_float(s[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  }
}

template <class T>
void max(T* __restrict d, const T* __restrict s, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    for (int64_t i = 0; i < n; ++i) d[i] = d[i] > s[i] ? d[i] : s[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    auto a = load(d[i]);
    auto b = load(s[i]);
    if (a != a) continue;  // NaN stays
    if (b != b || b > a) d[i] = s[i];
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

void host_reduce(void* dst, const void* src, DType dtype, int64_t n, ReduceOp op) {
  TANDEM_DISPATCH_ALL(dtype, "host_reduce", [&] {
    auto* d = static_cast<scalar_t*>(dst);
    auto* s = static_cast<const scalar_t*>(src);
    if (op == ReduceOp::Max) max(d, s, n);
    else sum(d, s, n);
  });
}

void host_divide(void* dst, DType dtype, int64_t n, int divisor) {
  if (divisor == 1) return;
  TANDEM_DISPATCH_ALL(dtype, "host_divide", [&] { divide(static_cast<scalar_t*>(dst), n, divisor); });
}

}  // namespace tandem::comm
