#include "kernels/cpu/gelu_cpu.h"

#include <vector>

#include "core/element.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels {

namespace {
// A flat f32 buffer as rows for the row-parallel kernels (one row if n has no small factor).
int64_t flat_row_width(int64_t n) { return n % 256 == 0 ? 256 : n; }
}  // namespace

void gelu_forward_cpu(const void* x, void* y, DType t, int64_t n, GeluApproximation approx) {
  if (t == DType::F32 && n > 0) {
    const int64_t w = flat_row_width(n);
    cpu_kernels().bias_gelu_forward(static_cast<const float*>(x), nullptr, static_cast<float*>(y), n / w, w, approx);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "gelu_forward_cpu", [&] {
    auto* px = static_cast<const scalar_t*>(x);
    auto* py = static_cast<scalar_t*>(y);
    for (int64_t i = 0; i < n; ++i) py[i] = store<scalar_t>(gelu_value(load(px[i]), approx));
  });
}

void gelu_backward_cpu(const void* dy, const void* x, void* dx, DType t, int64_t n, GeluApproximation approx) {
  if (t == DType::F32 && n > 0) {
    const int64_t w = flat_row_width(n);
    cpu_kernels().bias_gelu_backward(static_cast<const float*>(dy), static_cast<const float*>(x), nullptr,
                                     static_cast<float*>(dx), nullptr, n / w, w, approx);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "gelu_backward_cpu", [&] {
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* px = static_cast<const scalar_t*>(x);
    auto* pd = static_cast<scalar_t*>(dx);
    for (int64_t i = 0; i < n; ++i) pd[i] = store<scalar_t>(load(pg[i]) * gelu_derivative(load(px[i]), approx));
  });
}

void bias_gelu_forward_cpu(const void* x, const void* bias, void* y, DType t, int64_t rows, int64_t dim,
                           GeluApproximation approx) {
  if (t == DType::F32) {
    cpu_kernels().bias_gelu_forward(static_cast<const float*>(x), static_cast<const float*>(bias),
                                    static_cast<float*>(y), rows, dim, approx);
    return;
  }
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
  if (t == DType::F32) {
    cpu_kernels().bias_gelu_backward(static_cast<const float*>(dy), static_cast<const float*>(x),
                                     static_cast<const float*>(bias), static_cast<float*>(dx),
                                     static_cast<float*>(dbias), rows, dim, approx);
    return;
  }
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

}  // namespace tandem::kernels
