#include "kernels/bias_dropout_add.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/bias_dropout_add_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/bias_dropout_add_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class BiasDropoutAddBackward final : public Node {
 public:
  BiasDropoutAddBackward(DropoutStream rng, int64_t dim, bool has_bias, bool has_residual)
      : rng_(rng), dim_(dim), has_bias_(has_bias), has_residual_(has_residual) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const Tensor& dy = g[0];
    const int64_t rows = dy.numel() / dim_;
    const bool need_x = next_edges_[0].valid(), need_b = has_bias_ && next_edges_[1].valid();
    Tensor dx, db;
    if (need_x) dx = rng_.p == 0.0f ? dy : Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    if (need_b) db = Tensor::empty({dim_}, dy.dtype(), dy.device());
    // Without dropout dx is dy itself; the kernel then only sums the bias gradient.
    void* pdx = need_x && rng_.p != 0.0f ? dx.data_ptr() : nullptr;
    void* pdb = need_b ? db.data_ptr() : nullptr;
    if (pdx || pdb) {
      if (dy.device().is_cpu()) {
        bias_dropout_add_backward_cpu(dy.data_ptr(), pdx, pdb, dy.dtype(), rows, dim_, rng_.p, rng_.seed,
                                      rng_.host_subsequence());
      } else {
        TANDEM_CUDA_ONLY(bias_dropout_add_backward_cuda(dy.data_ptr(), pdx, pdb, dy.dtype(), rows, dim_, rng_.p,
                                                        rng_.seed, rng_.subsequence, rng_.step, dy.device().index,
                                                        stream_of(dy)));
      }
    }
    std::vector<Tensor> out{dx};
    if (has_bias_) out.push_back(db);
    if (has_residual_) out.push_back(dy);
    return out;
  }
  std::string name() const override { return "BiasDropoutAddBackward"; }

 private:
  DropoutStream rng_;
  int64_t dim_;
  bool has_bias_, has_residual_;
};

Tensor fused(const char* op, const Tensor& x, const Tensor& bias, const Tensor& residual, DropoutStream rng) {
  TANDEM_CHECK(x.defined(), "{}: input is undefined", op);
  TANDEM_CHECK(is_floating(x.dtype()), "{}: input must be floating, got {}", op, x.str());
  if (bias.defined()) {
    check_same_device_and_dtype(op, {&x, &bias});
    TANDEM_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1),
                 "{}: bias {} must be [D] for input {} [..., D]", op, bias.str(), x.str());
  }
  if (residual.defined()) {
    check_same_device_and_dtype(op, {&x, &residual});
    check_same_shape(op, x, residual);
  }
  const int64_t dim = bias.defined() ? bias.size(0) : (x.dim() >= 1 ? x.size(-1) : 1);
  const int64_t rows = dim > 0 ? x.numel() / dim : 0;
  const void* pb = bias.defined() ? bias.data_ptr() : nullptr;
  const void* pr = residual.defined() ? residual.data_ptr() : nullptr;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    bias_dropout_add_forward_cpu(x.data_ptr(), pb, pr, y.data_ptr(), x.dtype(), rows, dim, rng.p, rng.seed,
                                 rng.host_subsequence());
  } else {
    TANDEM_CUDA_ONLY(bias_dropout_add_forward_cuda(x.data_ptr(), pb, pr, y.data_ptr(), x.dtype(), rows, dim, rng.p,
                                                   rng.seed, rng.subsequence, rng.step, stream_of(x)));
  }
  std::vector<const Tensor*> inputs{&x};
  if (bias.defined()) inputs.push_back(&bias);
  if (residual.defined()) inputs.push_back(&residual);
  if (any_requires_grad(inputs))
    std::make_shared<BiasDropoutAddBackward>(rng, dim, bias.defined(), residual.defined())->connect(inputs, {&y});
  return y;
}

}  // namespace

DropoutStream dropout_stream(const char* op, double p, bool training, uint64_t seed, uint64_t subsequence,
                             const int64_t* step) {
  TANDEM_CHECK(p >= 0.0 && p <= 1.0, "{}: dropout probability must be in [0, 1], got {}", op, p);
  return DropoutStream{training ? static_cast<float>(p) : 0.0f, seed, subsequence, step};
}

Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed, uint64_t subsequence, const int64_t* step) {
  OpScope scope("dropout");
  DropoutStream rng = dropout_stream("dropout", p, training, seed, subsequence, step);
  if (rng.p == 0.0f) return x;
  return fused("dropout", x, Tensor(), Tensor(), rng);
}

Tensor add_bias(const Tensor& x, const Tensor& bias) {
  OpScope scope("add_bias");
  TANDEM_CHECK(bias.defined(), "add_bias: bias is undefined");
  return fused("add_bias", x, bias, Tensor(), DropoutStream{0.0f, 0, 0, nullptr});
}

Tensor bias_dropout_add(const Tensor& x, const Tensor& bias, const Tensor& residual, double p, bool training,
                        uint64_t seed, uint64_t subsequence, const int64_t* step) {
  OpScope scope("bias_dropout_add");
  return fused("bias_dropout_add", x, bias, residual,
               dropout_stream("bias_dropout_add", p, training, seed, subsequence, step));
}

}  // namespace tandem::kernels
