#include "kernels/gelu.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/checks.h"
#include "kernels/cpu/bias_dropout_add_cpu.h"
#include "kernels/cpu/gelu_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/bias_dropout_add_cuda.h"
#include "kernels/cuda/gelu_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#endif

namespace tandem::kernels {

namespace {

class GeluBackward final : public Node {
 public:
  GeluBackward(const Tensor& x, GeluApproximation approx) : x_(x), approx_(approx) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this);
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (x.device().is_cpu()) {
      gelu_backward_cpu(g[0].data_ptr(), x.data_ptr(), dx.data_ptr(), x.dtype(), x.numel(), approx_);
    } else {
      TANDEM_CUDA_ONLY(gelu_backward_cuda(g[0].data_ptr(), x.data_ptr(), dx.data_ptr(), x.dtype(), x.numel(), approx_,
                                          stream_of(x)));
    }
    return {dx};
  }
  void release_saved() override { x_.release(); }
  std::string name() const override { return "GeluBackward"; }

 private:
  SavedTensor x_;
  GeluApproximation approx_;
};

bool fused_on_gpu() {
#if TANDEM_WITH_CUDA
  return gelu_dropout_kernel() == GeluDropoutKernel::Fused;
#else
  return false;
#endif
}

// The keep bytes the fused forward fills for its backward (TANDEM_DROPOUT_KEEP=saved): only on a GPU,
// with the fused kernels, and when a backward will follow; otherwise none, and the backward computes
// the decisions again.
Tensor keep_bytes_buffer(const Tensor& x, const Tensor& bias) {
#if TANDEM_WITH_CUDA
  if (x.device().is_cuda() && fused_on_gpu() && dropout_keep() == DropoutKeep::Saved && any_requires_grad({&x, &bias}))
    return Tensor::empty({dropout_keep_bytes(x.numel())}, DType::U8, x.device());
#else
  (void)x, (void)bias;
#endif
  return {};
}

// The gradient of bias_gelu(x, b), or of dropout(bias_gelu(x, b)) (d.p > 0). With dropout, separately
// (the CPU, and the GPU with TANDEM_GELU_DROPOUT=separate), dropout's backward writes its input
// gradient to a temporary that bias_gelu's backward reads, exactly as the two ops' nodes would; fused,
// one kernel does both, reading the forward's keep bytes where it saved them.
class BiasGeluBackward final : public Node {
 public:
  BiasGeluBackward(const Tensor& x, const Tensor& b, GeluApproximation approx, DropoutStream d,
                   const Tensor& keep = Tensor())
      : x_(x), b_(b), keep_(keep), approx_(approx), d_(d) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this), b = b_.unpack(*this), keep = keep_.unpack(*this);
    const int64_t dim = b.numel(), rows = x.numel() / dim;
    Tensor dx, db;
    if (next_edges_[0].valid()) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (next_edges_[1].valid()) db = Tensor::empty(b.shape(), b.dtype(), b.device());
    void* pdx = dx.defined() ? dx.data_ptr() : nullptr;
    void* pdb = db.defined() ? db.data_ptr() : nullptr;
    const bool fused = d_.p != 0.0f && !x.device().is_cpu() && fused_on_gpu();
    Tensor du = g[0];  // bias_gelu's output gradient: dropout's input gradient, with dropout
    if (d_.p != 0.0f && !fused) {
      du = Tensor::empty(x.shape(), x.dtype(), x.device());
      if (x.device().is_cpu())
        bias_dropout_add_backward_cpu(g[0].data_ptr(), du.data_ptr(), nullptr, x.dtype(), rows, dim, d_.p, d_.seed,
                                      d_.host_subsequence());
      else
        TANDEM_CUDA_ONLY(bias_dropout_add_backward_cuda(g[0].data_ptr(), du.data_ptr(), nullptr, x.dtype(), rows, dim,
                                                        d_.p, d_.seed, d_.subsequence, d_.step, x.device().index,
                                                        stream_of(x)));
    }
    if (x.device().is_cpu()) {
      bias_gelu_backward_cpu(du.data_ptr(), x.data_ptr(), b.data_ptr(), pdx, pdb, x.dtype(), rows, dim, approx_);
    } else if (fused) {
      TANDEM_CUDA_ONLY(bias_gelu_dropout_backward_cuda(g[0].data_ptr(), x.data_ptr(), b.data_ptr(), pdx, pdb,
                                                       x.dtype(), rows, dim, approx_, d_.p, d_.seed, d_.subsequence,
                                                       d_.step, x.device().index, stream_of(x),
                                                       keep.defined() ? keep.data<uint8_t>() : nullptr));
    } else {
      TANDEM_CUDA_ONLY(bias_gelu_backward_cuda(du.data_ptr(), x.data_ptr(), b.data_ptr(), pdx, pdb, x.dtype(), rows,
                                               dim, approx_, x.device().index, stream_of(x)));
    }
    return {dx, db};
  }
  void release_saved() override {
    x_.release();
    b_.release();
    keep_.release();
  }
  std::string name() const override { return d_.p != 0.0f ? "BiasGeluDropoutBackward" : "BiasGeluBackward"; }

 private:
  SavedTensor x_, b_, keep_;
  GeluApproximation approx_;
  DropoutStream d_;
};

void check_bias_gelu(const char* op, const Tensor& x, const Tensor& bias) {
  check_same_device_and_dtype(op, {&x, &bias});
  TANDEM_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1) && bias.size(0) > 0,
               "{}: bias {} must be [D] for input {} [..., D] with D > 0", op, bias.str(), x.str());
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approx) {
  OpScope scope("gelu");
  check_same_device_and_dtype("gelu", {&x});
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    gelu_forward_cpu(x.data_ptr(), y.data_ptr(), x.dtype(), x.numel(), approx);
  } else {
    TANDEM_CUDA_ONLY(gelu_forward_cuda(x.data_ptr(), y.data_ptr(), x.dtype(), x.numel(), approx, stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<GeluBackward>(x, approx)->connect({&x}, {&y});
  return y;
}

Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApproximation approx) {
  OpScope scope("bias_gelu");
  check_bias_gelu("bias_gelu", x, bias);
  const int64_t dim = bias.size(0), rows = x.numel() / dim;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    bias_gelu_forward_cpu(x.data_ptr(), bias.data_ptr(), y.data_ptr(), x.dtype(), rows, dim, approx);
  } else {
    TANDEM_CUDA_ONLY(bias_gelu_forward_cuda(x.data_ptr(), bias.data_ptr(), y.data_ptr(), x.dtype(), rows, dim, approx,
                                            stream_of(x)));
  }
  if (any_requires_grad({&x, &bias}))
    std::make_shared<BiasGeluBackward>(x, bias, approx, DropoutStream{0.0f, 0, 0, nullptr})->connect({&x, &bias}, {&y});
  return y;
}

Tensor bias_gelu_dropout(const Tensor& x, const Tensor& bias, GeluApproximation approx, double p, bool training,
                         uint64_t seed, uint64_t subsequence, const int64_t* step) {
  const DropoutStream d = dropout_stream("bias_gelu_dropout", p, training, seed, subsequence, step);
  if (d.p == 0.0f) return bias_gelu(x, bias, approx);
  OpScope scope("bias_gelu_dropout");
  check_bias_gelu("bias_gelu_dropout", x, bias);
  const int64_t dim = bias.size(0), rows = x.numel() / dim;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor keep;  // the keep bytes, where the fused forward saves them
  if (x.device().is_cpu()) {
    Tensor h = Tensor::empty(x.shape(), x.dtype(), x.device());
    bias_gelu_forward_cpu(x.data_ptr(), bias.data_ptr(), h.data_ptr(), x.dtype(), rows, dim, approx);
    bias_dropout_add_forward_cpu(h.data_ptr(), nullptr, nullptr, y.data_ptr(), x.dtype(), rows, dim, d.p, d.seed,
                                 d.host_subsequence());
  } else if (fused_on_gpu()) {
    keep = keep_bytes_buffer(x, bias);
    TANDEM_CUDA_ONLY(bias_gelu_dropout_forward_cuda(x.data_ptr(), bias.data_ptr(), y.data_ptr(), x.dtype(), rows, dim,
                                                    approx, d.p, d.seed, d.subsequence, d.step, stream_of(x),
                                                    keep.defined() ? keep.data<uint8_t>() : nullptr));
  } else {
    Tensor h = Tensor::empty(x.shape(), x.dtype(), x.device());
    TANDEM_CUDA_ONLY(bias_gelu_forward_cuda(x.data_ptr(), bias.data_ptr(), h.data_ptr(), x.dtype(), rows, dim, approx,
                                            stream_of(x)));
    TANDEM_CUDA_ONLY(bias_dropout_add_forward_cuda(h.data_ptr(), nullptr, nullptr, y.data_ptr(), x.dtype(), rows, dim,
                                                   d.p, d.seed, d.subsequence, d.step, stream_of(x)));
  }
  if (any_requires_grad({&x, &bias}))
    std::make_shared<BiasGeluBackward>(x, bias, approx, d, keep)->connect({&x, &bias}, {&y});
  return y;
}

}  // namespace tandem::kernels
