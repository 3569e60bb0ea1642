#include "kernels/cpu/gelu_cpu.h"

#include <vector>

#include "core/element.h"

namespace tandem {

void gelu_forward_cpu(const void* x, void* y, DType t, int64_t n, GeluApproximation approx) {
  TANDEM_DISPATCH_FLOAT(t, "gelu_forward_cpu", [&] {
    auto* px = static_cast<const scalar_t*>(x);
    auto* py = static_cast<scalar_t*>(y);
    for (int64_t i = 0; i < n; ++i) py[i] = store<scalar_t>(gelu_value(load(px[i]), approx));
  });
}

void gelu_backward_cpu(const void* dy, const void* x, void* dx, DType t, int64_t n, GeluApproximation approx) {
  TANDEM_DISPATCH_FLOAT(t, "gelu_backward_cpu", [&] {
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* px = static_cast<const scalar_t*>(x);
    auto* pd = static_cast<scalar_t*>(dx);
    for (int64_t i = 0; i < n; ++i) pd[i] = store<scalar_t>(load(pg[i]) * gelu_derivative(load(px[i]), approx));
  });
}

void bias_gelu_forward_cpu(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                           GeluApproximation approx) {
  TANDEM_DISPATCH_FLOAT(t, "bias_gelu_forward_cpu", [&] {
    auto* px = static_cast<const scalar_t*>(x);
    auto* pb = static_cast<const scalar_t*>(bias);
    auto* py = static_cast<scalar_t*>(y);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = 0; d < dim; ++d)
        py[r * dim + d] = store<scalar_t>(gelu_value(load(px[r * dim + d]) + load(pb[d]), approx));
  });
}

void bias_gelu_backward_cpu(const void* dy, const void* x, const void* bias, void* dx, void* dbias, DType t,
                            int64_t rows, int64_t dim, GeluApproximation approx) {
  TANDEM_DISPATCH_FLOAT(t, "bias_gelu_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* px = static_cast<const scalar_t*>(x);
    auto* pb = static_cast<const scalar_t*>(bias);
    auto* pdx = static_cast<scalar_t*>(dx);
    std::vector<A> colsum(static_cast<size_t>(dim), A(0));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t i = r * dim + d;
        A du = load(pg[i]) * gelu_derivative(load(px[i]) + load(pb[d]), approx);
        if (pdx) pdx[i] = store<scalar_t>(du);
        colsum[static_cast<size_t>(d)] += du;
      }
    }
    if (dbias)
      for (int64_t d = 0; d < dim; ++d) static_cast<scalar_t*>(dbias)[d] = store<scalar_t>(colsum[static_cast<size_t>(d)]);
  });
}

}  // namespace tandem
