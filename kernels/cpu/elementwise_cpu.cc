#include "kernels/cpu/elementwise_cpu.h"

#include "core/element.h"

namespace tandem::kernels {

void binary_cpu(BinaryOp op, const void* a, const void* b, void* out, DType t, int64_t n) {
  TANDEM_DISPATCH_FLOAT(t, "binary_cpu", [&] {
    auto* pa = static_cast<const scalar_t*>(a);
    auto* pb = static_cast<const scalar_t*>(b);
    auto* po = static_cast<scalar_t*>(out);
    if (op == BinaryOp::Add) {
      for (int64_t i = 0; i < n; ++i) po[i] = store<scalar_t>(load(pa[i]) + load(pb[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = store<scalar_t>(load(pa[i]) * load(pb[i]));
    }
  });
}

void scale_cpu(const void* x, void* out, DType t, int64_t n, double alpha) {
  TANDEM_DISPATCH_FLOAT(t, "scale_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* px = static_cast<const scalar_t*>(x);
    auto* po = static_cast<scalar_t*>(out);
    const A s = static_cast<A>(alpha);
    for (int64_t i = 0; i < n; ++i) po[i] = store<scalar_t>(s * load(px[i]));
  });
}

void relu_forward_cpu(const void* x, void* y, DType t, int64_t n) {
  TANDEM_DISPATCH_FLOAT(t, "relu_forward_cpu", [&] {
    auto* px = static_cast<const scalar_t*>(x);
    auto* py = static_cast<scalar_t*>(y);
    for (int64_t i = 0; i < n; ++i) {
      auto v = load(px[i]);
      py[i] = store<scalar_t>(v > 0 ? v : 0);
    }
  });
}

void relu_backward_cpu(const void* dy, const void* x, void* dx, DType t, int64_t n) {
  TANDEM_DISPATCH_FLOAT(t, "relu_backward_cpu", [&] {
    auto* pdy = static_cast<const scalar_t*>(dy);
    auto* px = static_cast<const scalar_t*>(x);
    auto* pdx = static_cast<scalar_t*>(dx);
    for (int64_t i = 0; i < n; ++i) pdx[i] = load(px[i]) > 0 ? pdy[i] : store<scalar_t>(0);
  });
}

}  // namespace tandem::kernels
