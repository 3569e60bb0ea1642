#include "kernels/pooling.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/acc_dtype.h"
#include "kernels/checks.h"
#include "kernels/cpu/pooling_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/pooling_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class MaskedMeanPoolBackward final : public Node {
 public:
  MaskedMeanPoolBackward(const Tensor& mask, const Tensor& count) : mask_(mask), count_(count) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor mask = mask_.unpack(*this), count = count_.unpack(*this);
    const InputMeta& m = input_meta_[0];
    const int64_t batch = m.shape[0], seq = m.shape[1], dim = m.shape[2];
    Tensor dx = Tensor::empty(m.shape, m.dtype, m.device);
    if (m.device.is_cpu()) {
      masked_mean_pool_backward_cpu(g[0].data_ptr(), mask.data<uint8_t>(), count.data_ptr(), dx.data_ptr(), m.dtype,
                                    batch, seq, dim);
    } else {
      TANDEM_CUDA_ONLY(masked_mean_pool_backward_cuda(g[0].data_ptr(), mask.data<uint8_t>(), count.data_ptr(),
                                                      dx.data_ptr(), m.dtype, batch, seq, dim, stream_of(dx)));
    }
    return {dx};
  }
  void release_saved() override {
    mask_.release();
    count_.release();
  }
  std::string name() const override { return "MaskedMeanPoolBackward"; }

 private:
  SavedTensor mask_, count_;
};

class WeightedSumPoolBackward final : public Node {
 public:
  explicit WeightedSumPoolBackward(const Tensor& weights) : weights_(weights) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor w = weights_.unpack(*this);
    const InputMeta& m = input_meta_[0];
    const int64_t batch = m.shape[0], seq = m.shape[1], dim = m.shape[2];
    Tensor dx = Tensor::empty(m.shape, m.dtype, m.device);
    if (m.device.is_cpu()) {
      weighted_sum_pool_backward_cpu(g[0].data_ptr(), w.data_ptr(), dx.data_ptr(), m.dtype, batch, seq, dim);
    } else {
      TANDEM_CUDA_ONLY(weighted_sum_pool_backward_cuda(g[0].data_ptr(), w.data_ptr(), dx.data_ptr(), m.dtype, batch,
                                                       seq, dim, stream_of(dx)));
    }
    return {dx};
  }
  void release_saved() override { weights_.release(); }
  std::string name() const override { return "WeightedSumPoolBackward"; }

 private:
  SavedTensor weights_;
};

class FirstTokenPoolBackward final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const InputMeta& m = input_meta_[0];
    Tensor dx = Tensor::empty(m.shape, m.dtype, m.device);
    if (m.device.is_cpu()) {
      first_token_pool_backward_cpu(g[0].data_ptr(), dx.data_ptr(), m.dtype, m.shape[0], m.shape[1], m.shape[2]);
    } else {
      TANDEM_CUDA_ONLY(first_token_pool_backward_cuda(g[0].data_ptr(), dx.data_ptr(), m.dtype, m.shape[0], m.shape[1],
                                                      m.shape[2], stream_of(dx)));
    }
    return {dx};
  }
  std::string name() const override { return "FirstTokenPoolBackward"; }
};

void check_states(const char* op, const Tensor& x) {
  check_same_device_and_dtype(op, {&x});
  TANDEM_CHECK(is_floating(x.dtype()), "{}: input must be floating, got {}", op, x.str());
  TANDEM_CHECK(x.dim() == 3, "{}: input must be [batch, seq, dim], got {}", op, x.str());
}

}  // namespace

Tensor masked_mean_pool(const Tensor& x, const Tensor& mask) {
  OpScope scope("masked_mean_pool");
  check_states("masked_mean_pool", x);
  TANDEM_CHECK(mask.defined() && mask.dtype() == DType::U8, "masked_mean_pool: mask must be u8 (1 = real token), got {}",
               mask.defined() ? mask.str() : "undefined");
  TANDEM_CHECK(mask.shape() == Shape({x.size(0), x.size(1)}), "masked_mean_pool: mask {} must be [batch, seq] of input {}",
               mask.str(), x.str());
  TANDEM_CHECK(mask.device() == x.device(), "masked_mean_pool: mask is on {} but input on {}", mask.device().str(),
               x.device().str());
  const int64_t batch = x.size(0), seq = x.size(1), dim = x.size(2);
  Tensor y = Tensor::empty({batch, dim}, x.dtype(), x.device());
  Tensor count = Tensor::empty({batch}, acc_dtype(x.dtype()), x.device());
  if (x.device().is_cpu()) {
    masked_mean_pool_forward_cpu(x.data_ptr(), mask.data<uint8_t>(), y.data_ptr(), count.data_ptr(), x.dtype(), batch,
                                 seq, dim);
  } else {
    TANDEM_CUDA_ONLY(masked_mean_pool_forward_cuda(x.data_ptr(), mask.data<uint8_t>(), y.data_ptr(), count.data_ptr(),
                                                   x.dtype(), batch, seq, dim, x.device().index, stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<MaskedMeanPoolBackward>(mask, count)->connect({&x}, {&y});
  return y;
}

Tensor weighted_sum_pool(const Tensor& x, const Tensor& weights) {
  OpScope scope("weighted_sum_pool");
  check_states("weighted_sum_pool", x);
  TANDEM_CHECK(weights.defined() && weights.dtype() == acc_dtype(x.dtype()),
               "weighted_sum_pool: weights must be {} for {} input, got {}", dtype_name(acc_dtype(x.dtype())),
               dtype_name(x.dtype()), weights.defined() ? weights.str() : "undefined");
  TANDEM_CHECK(weights.shape() == Shape({x.size(0), x.size(1)}),
               "weighted_sum_pool: weights {} must be [batch, seq] of input {}", weights.str(), x.str());
  TANDEM_CHECK(weights.device() == x.device(), "weighted_sum_pool: weights are on {} but input on {}",
               weights.device().str(), x.device().str());
  TANDEM_CHECK(!weights.requires_grad(), "weighted_sum_pool: the weights are constants and must not require grad");
  const int64_t batch = x.size(0), seq = x.size(1), dim = x.size(2);
  Tensor y = Tensor::empty({batch, dim}, x.dtype(), x.device());
  if (x.device().is_cpu()) {
    weighted_sum_pool_forward_cpu(x.data_ptr(), weights.data_ptr(), y.data_ptr(), x.dtype(), batch, seq, dim);
  } else {
    TANDEM_CUDA_ONLY(weighted_sum_pool_forward_cuda(x.data_ptr(), weights.data_ptr(), y.data_ptr(), x.dtype(), batch,
                                                    seq, dim, stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<WeightedSumPoolBackward>(weights)->connect({&x}, {&y});
  return y;
}

Tensor first_token_pool(const Tensor& x) {
  OpScope scope("first_token_pool");
  check_states("first_token_pool", x);
  TANDEM_CHECK(x.size(1) >= 1, "first_token_pool: input {} has no tokens", x.str());
  const int64_t batch = x.size(0), seq = x.size(1), dim = x.size(2);
  Tensor y = Tensor::empty({batch, dim}, x.dtype(), x.device());
  if (x.device().is_cpu()) {
    first_token_pool_forward_cpu(x.data_ptr(), y.data_ptr(), x.dtype(), batch, seq, dim);
  } else {
    TANDEM_CUDA_ONLY(first_token_pool_forward_cuda(x.data_ptr(), y.data_ptr(), x.dtype(), batch, seq, dim, stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<FirstTokenPoolBackward>()->connect({&x}, {&y});
  return y;
}

}  // namespace tandem::kernels
