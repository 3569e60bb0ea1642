#include "kernels/cpu/bias_dropout_add_cpu.h"

#include <vector>

#include "core/element.h"
#include "kernels/dropout_mask.h"

namespace tandem {

namespace {

// Keep factors (scale or 0) in flat order, one Philox block per 4 elements.
class MaskStream {
 public:
  MaskStream(float p, uint64_t seed, uint64_t subsequence)
      : p_(p), scale_(dropout_scale(p)), seed_(seed), subsequence_(subsequence) {}
  float factor(uint64_t i) {
    if (p_ == 0.0f) return 1.0f;
    if (i / 4 != block_) {
      block_ = i / 4;
      bits_ = dropout_keep4(seed_, subsequence_, block_, p_);
    }
    return (bits_ >> (i % 4)) & 1u ? scale_ : 0.0f;
  }

 private:
  float p_, scale_;
  uint64_t seed_, subsequence_;
  uint64_t block_ = ~uint64_t{0};
  unsigned bits_ = 0;
};

}  // namespace

void bias_dropout_add_forward_cpu(const void* x, const void* bias, const void* residual, void* y, DType t,
                                  int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence) {
  TANDEM_DISPATCH_FLOAT(t, "bias_dropout_add_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* px = static_cast<const scalar_t*>(x);
    auto* pb = static_cast<const scalar_t*>(bias);
    auto* pr = static_cast<const scalar_t*>(residual);
    auto* py = static_cast<scalar_t*>(y);
    MaskStream mask(p, seed, subsequence);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t i = r * dim + d;
        A v = load(px[i]);
        if (pb) v += load(pb[d]);
        v *= static_cast<A>(mask.factor(static_cast<uint64_t>(i)));
        if (pr) v += load(pr[i]);
        py[i] = store<scalar_t>(v);
      }
    }
  });
}

void bias_dropout_add_backward_cpu(const void* dy, void* dx, void* dbias, DType t, int64_t rows, int64_t dim, float p,
                                   uint64_t seed, uint64_t subsequence) {
  TANDEM_DISPATCH_FLOAT(t, "bias_dropout_add_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* pdx = static_cast<scalar_t*>(dx);
    std::vector<A> colsum(dbias ? static_cast<size_t>(dim) : 0, A(0));
    MaskStream mask(p, seed, subsequence);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t i = r * dim + d;
        A du = load(pg[i]) * static_cast<A>(mask.factor(static_cast<uint64_t>(i)));
        if (pdx) pdx[i] = store<scalar_t>(du);
        if (dbias) colsum[static_cast<size_t>(d)] += du;
      }
    }
    if (dbias)
      for (int64_t d = 0; d < dim; ++d) static_cast<scalar_t*>(dbias)[d] = store<scalar_t>(colsum[static_cast<size_t>(d)]);
  });
}

}  // namespace tandem
