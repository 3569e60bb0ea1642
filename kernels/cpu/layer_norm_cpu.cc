#include "kernels/cpu/layer_norm_cpu.h"

#include <cmath>
#include <vector>

#include "core/element.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels {

namespace {

template <class T, class W>
void forward(const T* x, const W* w, const W* b, T* y, acc_t<T>* mean, acc_t<T>* rstd, int64_t rows, int64_t dim,
             double eps) {
  using A = acc_t<T>;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    A s = 0;
    for (int64_t d = 0; d < dim; ++d) s += load(xr[d]);
    const A mu = s / static_cast<A>(dim);
    A v = 0;
    for (int64_t d = 0; d < dim; ++d) {
      A c = load(xr[d]) - mu;
      v += c * c;
    }
    const A rs = A(1) / std::sqrt(v / static_cast<A>(dim) + static_cast<A>(eps));
    for (int64_t d = 0; d < dim; ++d)
      y[r * dim + d] = store<T>((load(xr[d]) - mu) * rs * static_cast<A>(load(w[d])) + static_cast<A>(load(b[d])));
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
  }
}

template <class T, class W>
void backward(const T* dy, const T* x, const W* w, const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, W* dw, W* db,
              int64_t rows, int64_t dim) {
  using A = acc_t<T>;
  std::vector<A> sw(dw ? static_cast<size_t>(dim) : 0), sb(db ? static_cast<size_t>(dim) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* gr = dy + r * dim;
    const A mu = mean[r], rs = rstd[r];
    if (dx) {
      A sum_g = 0, sum_gx = 0;
      for (int64_t d = 0; d < dim; ++d) {
        A g = load(gr[d]) * static_cast<A>(load(w[d]));
        sum_g += g;
        sum_gx += g * (load(xr[d]) - mu) * rs;
      }
      const A mg = sum_g / static_cast<A>(dim), mgx = sum_gx / static_cast<A>(dim);
      for (int64_t d = 0; d < dim; ++d) {
        A xhat = (load(xr[d]) - mu) * rs;
        A g = load(gr[d]) * static_cast<A>(load(w[d]));
        dx[r * dim + d] = store<T>(rs * (g - mg - xhat * mgx));
      }
    }
    for (int64_t d = 0; d < dim; ++d) {
      if (dw) sw[static_cast<size_t>(d)] += load(gr[d]) * (load(xr[d]) - mu) * rs;
      if (db) sb[static_cast<size_t>(d)] += load(gr[d]);
    }
  }
  for (int64_t d = 0; d < dim; ++d) {
    if (dw) dw[d] = from_double<W>(static_cast<double>(sw[static_cast<size_t>(d)]));
    if (db) db[d] = from_double<W>(static_cast<double>(sb[static_cast<size_t>(d)]));
  }
}

}  // namespace

void layer_norm_forward_cpu(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                            int64_t rows, int64_t dim, double eps, DType t, DType wt) {
  if (t == DType::F32 && wt == DType::F32) {
    cpu_kernels().layer_norm_forward(static_cast<const float*>(x), static_cast<const float*>(weight),
                                     static_cast<const float*>(bias), static_cast<float*>(y), static_cast<float*>(mean),
                                     static_cast<float*>(rstd), rows, dim, static_cast<float>(eps));
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "layer_norm_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto call = [&](auto w_tag) {
      using W = decltype(w_tag);
      forward(static_cast<const scalar_t*>(x), static_cast<const W*>(weight), static_cast<const W*>(bias),
              static_cast<scalar_t*>(y), static_cast<A*>(mean), static_cast<A*>(rstd), rows, dim, eps);
    };
    if (wt == t) call(scalar_t{});
    else if (wt == DType::F32) call(float{});
    else TANDEM_FAIL("layer_norm: parameters of dtype {} with input {}", dtype_name(wt), dtype_name(t));
  });
}

void layer_norm_backward_cpu(const void* dy, const void* x, const void* weight, const void* mean, const void* rstd,
                             void* dx, void* dweight, void* dbias, int64_t rows, int64_t dim, DType t, DType wt) {
  if (t == DType::F32 && wt == DType::F32) {
    cpu_kernels().layer_norm_backward(static_cast<const float*>(dy), static_cast<const float*>(x),
                                      static_cast<const float*>(weight), static_cast<const float*>(mean),
                                      static_cast<const float*>(rstd), static_cast<float*>(dx),
                                      static_cast<float*>(dweight), static_cast<float*>(dbias), rows, dim);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "layer_norm_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto call = [&](auto w_tag) {
      using W = decltype(w_tag);
      backward(static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(x), static_cast<const W*>(weight),
               static_cast<const A*>(mean), static_cast<const A*>(rstd), static_cast<scalar_t*>(dx),
               static_cast<W*>(dweight), static_cast<W*>(dbias), rows, dim);
    };
    if (wt == t) call(scalar_t{});
    else if (wt == DType::F32) call(float{});
    else TANDEM_FAIL("layer_norm: parameters of dtype {} with input {}", dtype_name(wt), dtype_name(t));
  });
}

}  // namespace tandem::kernels
