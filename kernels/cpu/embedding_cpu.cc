#include "kernels/cpu/embedding_cpu.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/element.h"
#include "kernels/cpu/index_range_cpu.h"

namespace tandem::kernels {

void embedding_forward_cpu(const void* ids, DType id_type, const void* tok, const void* pos, void* out, int64_t batch,
                           int64_t seq, int64_t dim, DType t) {
  TANDEM_DISPATCH_FLOAT(t, "embedding_forward_cpu", [&] {
    auto* pt = static_cast<const scalar_t*>(tok);
    auto* pp = static_cast<const scalar_t*>(pos);
    auto* po = static_cast<scalar_t*>(out);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t row = b * seq + s;
        const scalar_t* trow = pt + index_at(ids, id_type, row) * dim;
        const scalar_t* prow = pp + s * dim;
        scalar_t* orow = po + row * dim;
        for (int64_t d = 0; d < dim; ++d) orow[d] = store<scalar_t>(load(trow[d]) + load(prow[d]));
      }
    }
  });
}

void embedding_backward_cpu(const void* dout, const void* ids, DType id_type, void* dtok, void* dpos, int64_t batch,
                            int64_t seq, int64_t dim, int64_t vocab, int64_t positions, DType t) {
  TANDEM_DISPATCH_FLOAT(t, "embedding_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    auto* pg = static_cast<const scalar_t*>(dout);
    const int64_t rows = batch * seq;
    std::vector<A> acc(static_cast<size_t>(dim));
    if (dtok) {
      auto* pt = static_cast<scalar_t*>(dtok);
      std::fill(pt, pt + vocab * dim, store<scalar_t>(A(0)));
      // Group the rows by id (stable: increasing position within an id), then sum each group once.
      std::vector<int64_t> order(static_cast<size_t>(rows));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return index_at(ids, id_type, a) < index_at(ids, id_type, b);
      });
      for (int64_t i = 0; i < rows;) {
        const int64_t id = index_at(ids, id_type, order[static_cast<size_t>(i)]);
        std::fill(acc.begin(), acc.end(), A(0));
        for (; i < rows && index_at(ids, id_type, order[static_cast<size_t>(i)]) == id; ++i) {
          const scalar_t* grow = pg + order[static_cast<size_t>(i)] * dim;
          for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += load(grow[d]);
        }
        for (int64_t d = 0; d < dim; ++d) pt[id * dim + d] = store<scalar_t>(acc[static_cast<size_t>(d)]);
      }
    }
    if (dpos) {
      auto* pp = static_cast<scalar_t*>(dpos);
      for (int64_t s = 0; s < positions; ++s) {
        std::fill(acc.begin(), acc.end(), A(0));
        if (s < seq)
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += load(pg[(b * seq + s) * dim + d]);
        for (int64_t d = 0; d < dim; ++d) pp[s * dim + d] = store<scalar_t>(acc[static_cast<size_t>(d)]);
      }
    }
  });
}

}  // namespace tandem::kernels
