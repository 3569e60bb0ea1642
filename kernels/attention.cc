#include "kernels/attention.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/attention_params.h"
#include "kernels/checks.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::kernels {

namespace {

// The bytes of a u8 tensor (the key-padding mask, the saved keep bits), or null for an undefined one.
const uint8_t* bytes_or_null(const Tensor& t) { return t.defined() ? t.data<uint8_t>() : nullptr; }

// The buffer for the forward's dropout keep bits where the backward will read them: on CUDA, with
// dropout, a backward to come, and TANDEM_ATTENTION_DROPOUT_KEEP=saved. Otherwise undefined (the
// backward recomputes the decisions, and the CPU reference always does).
Tensor keep_bits_buffer(const Tensor& qkv, const AttentionShape& s, const AttentionDropout& d) {
#if TANDEM_WITH_CUDA
  if (qkv.device().is_cuda() && d.active() && any_requires_grad({&qkv}) &&
      attention_dropout_keep() == AttentionDropoutKeep::Saved)
    return Tensor::empty({attention_keep_bytes(s)}, DType::U8, qkv.device());
#else
  (void)qkv, (void)s, (void)d;
#endif
  return {};
}

// Saves qkv, the mask and the softmax normalisers; the CUDA backward also needs the output, and the
// dropout's keep bits where the forward saved them (TANDEM_ATTENTION_DROPOUT_KEEP=saved).
class AttentionBackward final : public Node {
 public:
  AttentionBackward(const Tensor& qkv, const Tensor& mask, const Tensor& out, const Tensor& lse, const Tensor& keep,
                    const AttentionShape& shape, const AttentionDropout& dropout)
      : qkv_(qkv),
        mask_(mask),
        out_(qkv.device().is_cuda() ? SavedTensor(out) : SavedTensor()),
        lse_(lse),
        keep_(keep),
        shape_(shape),
        dropout_(dropout) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor qkv = qkv_.unpack(*this), mask = mask_.unpack(*this), lse = lse_.unpack(*this);
    const Tensor& dout = g[0];
    const Shape out_shape{shape_.batch, shape_.seq, shape_.heads * shape_.head_dim};
    TANDEM_CHECK(dout.defined() && dout.shape() == out_shape && dout.dtype() == qkv.dtype() &&
                     dout.device() == qkv.device(),
                 "attention backward: output gradient {} does not match the output ({} {} on {})",
                 dout.defined() ? dout.str() : "undefined", dtype_name(qkv.dtype()), shape_str(out_shape),
                 qkv.device().str());
    Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());
    if (qkv.device().is_cpu()) {
      attention_backward_cpu(qkv.data_ptr(), bytes_or_null(mask), lse.data_ptr(), dout.data_ptr(), dqkv.data_ptr(),
                             shape_, dropout_, qkv.dtype());
    } else {
      [[maybe_unused]] const Tensor keep = keep_.unpack(*this);
      TANDEM_CUDA_ONLY(attention_backward_cuda(qkv.data_ptr(), bytes_or_null(mask), out_.unpack(*this).data_ptr(),
                                               lse.data<float>(), dout.data_ptr(), dqkv.data_ptr(), shape_, dropout_,
                                               qkv.dtype(), qkv.device().index, stream_of(qkv),
                                               attention_backward_path(), bytes_or_null(keep)));
    }
    return {dqkv};
  }
  void release_saved() override {
    qkv_.release();
    mask_.release();
    out_.release();
    lse_.release();
    keep_.release();
  }
  std::string name() const override { return "AttentionBackward"; }

 private:
  SavedTensor qkv_, mask_, out_, lse_, keep_;
  AttentionShape shape_;
  AttentionDropout dropout_;
};

AttentionShape check_arguments(const Tensor& qkv, const Tensor& mask, int num_heads, double dropout_p) {
  check_same_device_and_dtype("attention", {&qkv});
  TANDEM_CHECK(is_floating(qkv.dtype()), "attention: qkv must be a floating type, got {}", qkv.str());
  TANDEM_CHECK(qkv.dim() == 3, "attention: qkv must be [batch, seq, 3 * heads * head_dim], got {}", qkv.str());
  TANDEM_CHECK(num_heads >= 1, "attention: num_heads must be >= 1, got {}", num_heads);
  const int64_t width = qkv.size(2);
  TANDEM_CHECK(width > 0 && width % (3 * int64_t{num_heads}) == 0,
               "attention: the last extent of qkv {} must be 3 * num_heads * head_dim with num_heads = {}", qkv.str(),
               num_heads);
  AttentionShape s{qkv.size(0), qkv.size(1), num_heads, width / (3 * int64_t{num_heads})};
  if (mask.defined()) {
    TANDEM_CHECK(mask.dtype() == DType::U8, "attention: key_padding_mask must be u8 (1 = real token), got {}",
                 mask.str());
    TANDEM_CHECK(mask.shape() == Shape({s.batch, s.seq}), "attention: key_padding_mask {} must be [{}, {}]",
                 mask.str(), s.batch, s.seq);
    TANDEM_CHECK(mask.device() == qkv.device(), "attention: key_padding_mask is on {} but qkv is on {}",
                 mask.device().str(), qkv.device().str());
  }
  TANDEM_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "attention: dropout_p must be in [0, 1), got {}", dropout_p);
  if (qkv.device().is_cuda()) {
    TANDEM_CHECK(qkv.dtype() != DType::F64, "attention on CUDA: f64 is not supported (f32, f16, bf16)");
    TANDEM_CHECK(s.head_dim <= kAttentionMaxHeadDimCuda,
                 "attention on CUDA: head_dim {} (= {} / (3 * {} heads)) exceeds the fused kernels' limit of {}",
                 s.head_dim, width, num_heads, kAttentionMaxHeadDimCuda);
  }
  return s;
}

}  // namespace

Tensor attention(const Tensor& qkv, const Tensor& key_padding_mask, int num_heads, double dropout_p, uint64_t seed,
                 uint64_t offset, const int64_t* dropout_step) {
  OpScope scope("attention");
  const AttentionShape s = check_arguments(qkv, key_padding_mask, num_heads, dropout_p);
  const AttentionDropout d{static_cast<float>(dropout_p), seed, offset, dropout_step, attention_dropout_rng()};
  Tensor out = Tensor::empty({s.batch, s.seq, s.heads * s.head_dim}, qkv.dtype(), qkv.device());
  const DType stats = qkv.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor lse = Tensor::empty({s.batch, s.heads, s.seq}, stats, qkv.device());
  Tensor keep = keep_bits_buffer(qkv, s, d);
  if (out.numel() > 0) {
    if (qkv.device().is_cpu()) {
      attention_forward_cpu(qkv.data_ptr(), bytes_or_null(key_padding_mask), out.data_ptr(), lse.data_ptr(), s, d,
                            qkv.dtype());
    } else {
      TANDEM_CUDA_ONLY(attention_forward_cuda(qkv.data_ptr(), bytes_or_null(key_padding_mask), out.data_ptr(),
                                              lse.data<float>(), s, d, qkv.dtype(), qkv.device().index,
                                              stream_of(qkv), attention_forward_kernel(),
                                              keep.defined() ? keep.data<uint8_t>() : nullptr));
    }
  }
  if (any_requires_grad({&qkv}))
    std::make_shared<AttentionBackward>(qkv, key_padding_mask, out, lse, keep, s, d)->connect({&qkv}, {&out});
  return out;
}

}  // namespace tandem::kernels
