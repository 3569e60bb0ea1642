#include "kernels/cpu/cross_entropy_cpu.h"

#include <cmath>

#include "core/element.h"
#include "kernels/cpu/index_range_cpu.h"

namespace tandem::kernels {

void cross_entropy_forward_cpu(const void* logits, const void* labels, DType label_type, void* row_loss, void* dlogits,
                               DType t, int64_t n, int64_t classes, double label_smoothing) {
  TANDEM_DISPATCH_FLOAT(t, "cross_entropy_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pz = static_cast<const scalar_t*>(logits);
    auto* pd = static_cast<A*>(dlogits);
    const A eps = static_cast<A>(label_smoothing);
    const A off = eps / static_cast<A>(classes);
    const A inv_n = A(1) / static_cast<A>(n);
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t* z = pz + i * classes;
      const int64_t y = index_at(labels, label_type, i);
      A m = load(z[0]);
      for (int64_t c = 1; c < classes; ++c) m = std::max(m, load(z[c]));
      A se = 0, sz = 0;
      for (int64_t c = 0; c < classes; ++c) {
        se += std::exp(load(z[c]) - m);
        sz += load(z[c]);
      }
      const A lse = m + std::log(se);
      static_cast<A*>(row_loss)[i] = lse - (A(1) - eps) * load(z[y]) - off * sz;
      if (pd) {
        for (int64_t c = 0; c < classes; ++c) {
          A target = (c == y ? A(1) - eps : A(0)) + off;
          pd[i * classes + c] = (std::exp(load(z[c]) - lse) - target) * inv_n;
        }
      }
    }
  });
}

void cross_entropy_weighted_forward_cpu(const void* logits, const void* labels, DType label_type,
                                        const void* class_weights, void* row_loss, void* dlogits, DType t, int64_t n,
                                        int64_t classes, double label_smoothing) {
  TANDEM_DISPATCH_FLOAT(t, "cross_entropy_weighted_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pz = static_cast<const scalar_t*>(logits);
    auto* pd = static_cast<A*>(dlogits);
    auto* w = static_cast<const A*>(class_weights);
    const A eps = static_cast<A>(label_smoothing);
    const A off = eps / static_cast<A>(classes);
    A total = 0, sw = 0;
    for (int64_t i = 0; i < n; ++i) total += w[index_at(labels, label_type, i)];
    for (int64_t c = 0; c < classes; ++c) sw += w[c];
    const A inv_total = A(1) / total;
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t* z = pz + i * classes;
      const int64_t y = index_at(labels, label_type, i);
      A m = load(z[0]);
      for (int64_t c = 1; c < classes; ++c) m = std::max(m, load(z[c]));
      A se = 0, swz = 0;
      for (int64_t c = 0; c < classes; ++c) {
        se += std::exp(load(z[c]) - m);
        swz += w[c] * load(z[c]);
      }
      const A lse = m + std::log(se);
      static_cast<A*>(row_loss)[i] =
          ((A(1) - eps) * w[y] * (lse - load(z[y])) + off * (sw * lse - swz)) * inv_total;
      if (pd) {
        for (int64_t c = 0; c < classes; ++c) {
          const A p = std::exp(load(z[c]) - lse);
          const A hard = (A(1) - eps) * w[y] * (p - (c == y ? A(1) : A(0)));
          pd[i * classes + c] = (hard + off * (sw * p - w[c])) * inv_total;
        }
      }
    }
  });
}

void scale_by_scalar_cpu(const void* src, const void* g, void* dst, DType t, int64_t n) {
  TANDEM_DISPATCH_FLOAT(t, "scale_by_scalar_cpu", [&] {
    using A = acc_t<scalar_t>;
    const A s = static_cast<const A*>(g)[0];
    auto* ps = static_cast<const A*>(src);
    auto* pd = static_cast<scalar_t*>(dst);
    for (int64_t i = 0; i < n; ++i) pd[i] = store<scalar_t>(ps[i] * s);
  });
}

int64_t accuracy_count_cpu(const void* logits, const void* labels, DType label_type, DType t, int64_t n,
                           int64_t classes) {
  int64_t correct = 0;
  TANDEM_DISPATCH_FLOAT(t, "accuracy_count_cpu", [&] {
    auto* pz = static_cast<const scalar_t*>(logits);
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t* z = pz + i * classes;
      int64_t best = 0;
      auto bv = load(z[0]);
      for (int64_t c = 1; c < classes && !std::isnan(bv); ++c) {
        auto v = load(z[c]);
        if (std::isnan(v) || v > bv) {
          best = c;
          bv = v;
        }
      }
      if (best == index_at(labels, label_type, i)) ++correct;
    }
  });
  return correct;
}

}  // namespace tandem::kernels
