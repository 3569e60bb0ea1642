#include "kernels/cpu/pooling_cpu.h"

#include <cstring>
#include <vector>

#include "core/element.h"

namespace tandem::kernels {

void masked_mean_pool_forward_cpu(const void* x, const uint8_t* mask, void* y, void* count, DType t, int64_t batch,
                                  int64_t seq, int64_t dim) {
  TANDEM_DISPATCH_FLOAT(t, "masked_mean_pool_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* px = static_cast<const scalar_t*>(x);
    auto* py = static_cast<scalar_t*>(y);
    std::vector<A> acc(static_cast<size_t>(dim));
    for (int64_t b = 0; b < batch; ++b) {
      std::fill(acc.begin(), acc.end(), A(0));
      A n = 0;
      for (int64_t s = 0; s < seq; ++s) {
        if (!mask[b * seq + s]) continue;
        n += 1;
        const scalar_t* row = px + (b * seq + s) * dim;
        for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += load(row[d]);
      }
      for (int64_t d = 0; d < dim; ++d) py[b * dim + d] = store<scalar_t>(n > 0 ? acc[static_cast<size_t>(d)] / n : A(0));
      static_cast<A*>(count)[b] = n;
    }
  });
}

void masked_mean_pool_backward_cpu(const void* dy, const uint8_t* mask, const void* count, void* dx, DType t,
                                   int64_t batch, int64_t seq, int64_t dim) {
  TANDEM_DISPATCH_FLOAT(t, "masked_mean_pool_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* pd = static_cast<scalar_t*>(dx);
    const A* pc = static_cast<const A*>(count);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const bool real = mask[b * seq + s] != 0;
        for (int64_t d = 0; d < dim; ++d)
          pd[(b * seq + s) * dim + d] = store<scalar_t>(real ? load(pg[b * dim + d]) / pc[b] : A(0));
      }
  });
}

void weighted_sum_pool_forward_cpu(const void* x, const void* w, void* y, DType t, int64_t batch, int64_t seq,
                                   int64_t dim) {
  TANDEM_DISPATCH_FLOAT(t, "weighted_sum_pool_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* px = static_cast<const scalar_t*>(x);
    auto* pw = static_cast<const A*>(w);
    auto* py = static_cast<scalar_t*>(y);
    std::vector<A> acc(static_cast<size_t>(dim));
    for (int64_t b = 0; b < batch; ++b) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t s = 0; s < seq; ++s) {
        const A ws = pw[b * seq + s];
        if (ws == A(0)) continue;
        const scalar_t* row = px + (b * seq + s) * dim;
        for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += ws * load(row[d]);
      }
      for (int64_t d = 0; d < dim; ++d) py[b * dim + d] = store<scalar_t>(acc[static_cast<size_t>(d)]);
    }
  });
}

void weighted_sum_pool_backward_cpu(const void* dy, const void* w, void* dx, DType t, int64_t batch, int64_t seq,
                                    int64_t dim) {
  TANDEM_DISPATCH_FLOAT(t, "weighted_sum_pool_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pg = static_cast<const scalar_t*>(dy);
    auto* pw = static_cast<const A*>(w);
    auto* pd = static_cast<scalar_t*>(dx);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        const A ws = pw[b * seq + s];
        for (int64_t d = 0; d < dim; ++d) pd[(b * seq + s) * dim + d] = store<scalar_t>(ws * load(pg[b * dim + d]));
      }
  });
}

void first_token_pool_forward_cpu(const void* x, void* y, DType t, int64_t batch, int64_t seq, int64_t dim) {
  const size_t row = static_cast<size_t>(dim) * dtype_size(t);
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(static_cast<char*>(y) + b * row, static_cast<const char*>(x) + b * seq * row, row);
}

void first_token_pool_backward_cpu(const void* dy, void* dx, DType t, int64_t batch, int64_t seq, int64_t dim) {
  const size_t row = static_cast<size_t>(dim) * dtype_size(t);
  std::memset(dx, 0, static_cast<size_t>(batch * seq) * row);  // +0.0 is all-zero bits in every float type
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(static_cast<char*>(dx) + b * seq * row, static_cast<const char*>(dy) + b * row, row);
}

}  // namespace tandem::kernels
