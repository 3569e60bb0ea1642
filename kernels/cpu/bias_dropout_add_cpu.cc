#include "kernels/cpu/bias_dropout_add_cpu.h"

#include <vector>

#include "core/element.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa/cpu_kernels.h"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {

namespace {

// Keep factors (scale or 0) in flat order, one Philox block per 8 elements.
class MaskStream {
 public:
  MaskStream(float p, uint64_t seed, uint64_t subsequence)
      : threshold_(dropout_threshold(p)), scale_(dropout_keep_scale(threshold_)), seed_(seed),
        subsequence_(subsequence) {}
  float factor(uint64_t i) {
    if (threshold_ == 0) return 1.0f;
    if (i / 8 != block_) {
      block_ = i / 8;
      bits_ = dropout_keep8(seed_, subsequence_, block_, threshold_);
    }
    return (bits_ >> (i % 8)) & 1u ? scale_ : 0.0f;
  }

 private:
  uint32_t threshold_;
  float scale_;
  uint64_t seed_, subsequence_;
  uint64_t block_ = ~uint64_t{0};
  uint32_t bits_ = 0;
};

// f32: threads over rows; each task asks the ISA kernel for the keep factors of
// its flat range (whole Philox blocks: the range is widened to a multiple of 8).
template <class Fn>
void for_rows_with_factors(int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence, const Fn& fn) {
  const CpuKernels& k = cpu_kernels();
  const uint32_t threshold = dropout_threshold(p);
  const float scale = dropout_keep_scale(threshold);
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(dim, 1)), [&](int64_t lo, int64_t hi) {
    const int64_t begin = lo * dim, end = hi * dim, first = begin / 8 * 8;
    std::vector<float> f(threshold == 0 ? 0 : static_cast<size_t>(end - first));
    if (threshold != 0)
      k.dropout_factors(seed, subsequence, static_cast<uint64_t>(first / 8), end - first, threshold, scale, f.data());
    for (int64_t r = lo; r < hi; ++r) fn(r, threshold == 0 ? nullptr : f.data() + (r * dim - first));
  });
}

void forward_f32(const float* x, const float* bias, const float* residual, float* y, int64_t rows, int64_t dim,
                 float p, uint64_t seed, uint64_t subsequence) {
  for_rows_with_factors(rows, dim, p, seed, subsequence, [&](int64_t r, const float* f) {
    const float* xr = x + r * dim;
    const float* rr = residual ? residual + r * dim : nullptr;
    float* yr = y + r * dim;
    for (int64_t d = 0; d < dim; ++d) {
      float v = xr[d];
      if (bias) v += bias[d];
      if (f) v *= f[d];
      if (rr) v += rr[d];
      yr[d] = v;
    }
  });
}

void backward_f32(const float* dy, float* dx, float* dbias, int64_t rows, int64_t dim, float p, uint64_t seed,
                  uint64_t subsequence) {
  // Called with dx only (without dx the reference path runs): dbias is the column sum of dx.
  for_rows_with_factors(rows, dim, p, seed, subsequence, [&](int64_t r, const float* f) {
    const float* g = dy + r * dim;
    float* o = dx + r * dim;
    if (f)
      for (int64_t d = 0; d < dim; ++d) o[d] = g[d] * f[d];
    else
      std::copy(g, g + dim, o);
  });
  if (dbias) cpu_kernels().column_sum(dx, rows, dim, dbias);
}

}  // namespace

void bias_dropout_add_forward_cpu(const void* x, const void* bias, const void* residual, void* y, DType t,
                                  int64_t rows, int64_t dim, float p, uint64_t seed, uint64_t subsequence) {
  if (t == DType::F32) {
    forward_f32(static_cast<const float*>(x), static_cast<const float*>(bias), static_cast<const float*>(residual),
                static_cast<float*>(y), rows, dim, p, seed, subsequence);
    return;
  }
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
  if (t == DType::F32 && dx) {
    backward_f32(static_cast<const float*>(dy), static_cast<float*>(dx), static_cast<float*>(dbias), rows, dim, p, seed,
                 subsequence);
    return;
  }
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

}  // namespace tandem::kernels
