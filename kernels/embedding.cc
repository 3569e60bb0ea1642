#include "kernels/embedding.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/embedding_cpu.h"
#include "kernels/cpu/index_range_cpu.h"
#include "kernels/device_stream.h"
#include "kernels/index_errors.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/embedding_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class EmbeddingBackward final : public Node {
 public:
  EmbeddingBackward(const Tensor& ids, int64_t vocab, int64_t positions)
      : ids_(ids), vocab_(vocab), positions_(positions) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor ids = ids_.unpack(*this);
    const Tensor& dout = g[0];
    const int64_t batch = ids.size(0), seq = ids.size(1), dim = dout.size(-1);
    Tensor dtok, dpos;
    if (next_edges_[0].valid()) dtok = Tensor::empty({vocab_, dim}, dout.dtype(), dout.device());
    if (next_edges_[1].valid()) dpos = Tensor::empty({positions_, dim}, dout.dtype(), dout.device());
    void* pt = dtok.defined() ? dtok.data_ptr() : nullptr;
    void* pp = dpos.defined() ? dpos.data_ptr() : nullptr;
    if (dout.device().is_cpu()) {
      embedding_backward_cpu(dout.data_ptr(), ids.data_ptr(), ids.dtype(), pt, pp, batch, seq, dim, vocab_,
                             positions_, dout.dtype());
    } else {
      raise_pending_index_error();
      TANDEM_CUDA_ONLY(embedding_backward_cuda(dout.data_ptr(), ids.data_ptr(), ids.dtype(), pt, pp, batch, seq, dim,
                                               vocab_, positions_, dout.dtype(), dout.device().index,
                                               stream_of(dout)));
    }
    return {dtok, dpos};
  }
  void release_saved() override { ids_.release(); }
  std::string name() const override { return "EmbeddingBackward"; }

 private:
  SavedTensor ids_;
  int64_t vocab_, positions_;
};

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& tok_table, const Tensor& pos_table) {
  OpScope scope("embedding");
  check_same_device_and_dtype("embedding", {&tok_table, &pos_table});
  TANDEM_CHECK(ids.defined(), "embedding: ids are undefined");
  TANDEM_CHECK(ids.dtype() == DType::I32 || ids.dtype() == DType::I64, "embedding: ids must be i32 or i64, got {}",
               ids.str());
  TANDEM_CHECK(ids.dim() == 2, "embedding: ids must be [batch, seq], got {}", ids.str());
  TANDEM_CHECK(ids.device() == tok_table.device(), "embedding: ids are on {} but the tables on {}",
               ids.device().str(), tok_table.device().str());
  TANDEM_CHECK(is_floating(tok_table.dtype()), "embedding: tables must be floating, got {}", tok_table.str());
  TANDEM_CHECK(tok_table.dim() == 2 && pos_table.dim() == 2 && tok_table.size(1) == pos_table.size(1),
               "embedding: tables must be [vocab, dim] and [positions, dim], got {} and {}", tok_table.str(),
               pos_table.str());
  const int64_t batch = ids.size(0), seq = ids.size(1), vocab = tok_table.size(0), dim = tok_table.size(1),
                positions = pos_table.size(0);
  TANDEM_CHECK(seq <= positions, "embedding: sequence length {} exceeds the {} learned positions", seq, positions);
  Tensor out = Tensor::empty({batch, seq, dim}, tok_table.dtype(), tok_table.device());
  if (ids.device().is_cpu()) {
    int64_t bad = first_out_of_range_cpu(ids.data_ptr(), ids.dtype(), ids.numel(), vocab);
    TANDEM_CHECK(bad < 0, "embedding: token id {} at [batch {}, position {}] is outside the vocabulary [0, {})",
                 index_at(ids.data_ptr(), ids.dtype(), bad), bad / seq, bad % seq, vocab);
    embedding_forward_cpu(ids.data_ptr(), ids.dtype(), tok_table.data_ptr(), pos_table.data_ptr(), out.data_ptr(),
                          batch, seq, dim, tok_table.dtype());
  } else {
    raise_pending_index_error();
    TANDEM_CUDA_ONLY(embedding_forward_cuda(ids.data_ptr(), ids.dtype(), tok_table.data_ptr(), pos_table.data_ptr(),
                                            out.data_ptr(), batch, seq, dim, vocab, tok_table.dtype(),
                                            stream_of(out)));
  }
  if (any_requires_grad({&tok_table, &pos_table}))
    std::make_shared<EmbeddingBackward>(ids, vocab, positions)->connect({&tok_table, &pos_table}, {&out});
  return out;
}

}  // namespace tandem::kernels
