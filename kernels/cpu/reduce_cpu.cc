#include "kernels/cpu/reduce_cpu.h"

#include "core/element.h"

namespace tandem::kernels {

void sum_cpu(const void* x, void* out, DType t, int64_t n, double scale) {
  TANDEM_DISPATCH_FLOAT(t, "sum_cpu", [&] {
    const scalar_t* p = static_cast<const scalar_t*>(x);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += to_double(p[i]);
    static_cast<scalar_t*>(out)[0] = from_double<scalar_t>(s * scale);
  });
}

void broadcast_scalar_cpu(const void* dy, void* dx, DType t, int64_t n, double scale) {
  TANDEM_DISPATCH_FLOAT(t, "broadcast_scalar_cpu", [&] {
    using A = acc_t<scalar_t>;
    scalar_t v = store<scalar_t>(static_cast<A>(scale) * load(static_cast<const scalar_t*>(dy)[0]));
    scalar_t* d = static_cast<scalar_t*>(dx);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

}  // namespace tandem::kernels
