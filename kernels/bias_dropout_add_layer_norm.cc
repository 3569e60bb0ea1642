#include "kernels/bias_dropout_add_layer_norm.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/acc_dtype.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/checks.h"
#include "kernels/cpu/bias_dropout_add_cpu.h"
#include "kernels/cpu/layer_norm_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/bias_dropout_add_cuda.h"
#include "kernels/cuda/layer_norm_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#endif

namespace tandem::kernels {

namespace {

// TANDEM_ADD_LAYER_NORM's choice, both ways and with every TANDEM_LAYER_NORM kernel.
bool fused_on_gpu() {
#if TANDEM_WITH_CUDA
  return add_layer_norm_kernel() == AddLayerNormKernel::Fused;
#else
  return false;
#endif
}

void* mut_ptr(Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// Gradients of x, bias, residual, weight and ln_bias. ds, the gradient of s, is the residual's; the
// branch's is ds times the keep factors (ds itself without dropout), and the bias's its column sums.
// Separately (the CPU, and the GPU with TANDEM_ADD_LAYER_NORM=separate), the layer norm's backward
// writes ds and bias_dropout_add's reads it, as the two ops' nodes would; fused, one kernel does both.
class BiasDropoutAddLayerNormBackward final : public Node {
 public:
  BiasDropoutAddLayerNormBackward(const Tensor& sum, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                  DropoutStream d)
      : sum_(sum), weight_(weight), mean_(mean), rstd_(rstd), d_(d) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor s = sum_.unpack(*this), w = weight_.unpack(*this), mean = mean_.unpack(*this), rstd = rstd_.unpack(*this);
    const Tensor& dy = g[0];
    const int64_t dim = s.size(-1), rows = s.numel() / dim;
    const bool need_x = next_edges_[0].valid(), need_bias = next_edges_[1].valid(), need_res = next_edges_[2].valid();
    Tensor ds, dx, dbias, dw, db;
    if (need_x || need_bias || need_res) ds = Tensor::empty(s.shape(), s.dtype(), s.device());
    if (need_x) dx = d_.p == 0.0f ? ds : Tensor::empty(s.shape(), s.dtype(), s.device());
    if (need_bias) dbias = Tensor::empty({dim}, s.dtype(), s.device());
    if (next_edges_[3].valid()) dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    if (next_edges_[4].valid()) db = Tensor::empty(w.shape(), w.dtype(), w.device());
    // dx is written only with dropout (without, it is ds).
    void* pdx = need_x && d_.p != 0.0f ? dx.data_ptr() : nullptr;
    if (s.device().is_cpu()) {
      layer_norm_backward_cpu(dy.data_ptr(), s.data_ptr(), w.data_ptr(), mean.data_ptr(), rstd.data_ptr(), mut_ptr(ds),
                              mut_ptr(dw), mut_ptr(db), rows, dim, s.dtype(), w.dtype());
      if (pdx || dbias.defined())
        bias_dropout_add_backward_cpu(ds.data_ptr(), pdx, mut_ptr(dbias), s.dtype(), rows, dim, d_.p, d_.seed,
                                      d_.host_subsequence());
    } else if (ds.defined() && fused_on_gpu()) {
      TANDEM_CUDA_ONLY(bias_dropout_add_layer_norm_backward_cuda(
          dy.data_ptr(), s.data_ptr(), w.data_ptr(), mean.data_ptr(), rstd.data_ptr(), ds.data_ptr(), mut_ptr(dw),
          mut_ptr(db), pdx, mut_ptr(dbias), d_.p, d_.seed, d_.subsequence, d_.step, rows, dim, s.dtype(), w.dtype(),
          s.device().index, stream_of(s)));
    } else {
      TANDEM_CUDA_ONLY(layer_norm_backward_cuda(dy.data_ptr(), s.data_ptr(), w.data_ptr(), mean.data_ptr(),
                                                rstd.data_ptr(), mut_ptr(ds), mut_ptr(dw), mut_ptr(db), rows, dim,
                                                s.dtype(), w.dtype(), s.device().index, stream_of(s)));
      if (pdx || dbias.defined())
        TANDEM_CUDA_ONLY(bias_dropout_add_backward_cuda(ds.data_ptr(), pdx, mut_ptr(dbias), s.dtype(), rows, dim, d_.p,
                                                        d_.seed, d_.subsequence, d_.step, s.device().index,
                                                        stream_of(s)));
    }
    return {dx, dbias, ds, dw, db};
  }
  void release_saved() override {
    sum_.release();
    weight_.release();
    mean_.release();
    rstd_.release();
  }
  std::string name() const override { return "BiasDropoutAddLayerNormBackward"; }

 private:
  SavedTensor sum_, weight_, mean_, rstd_;
  DropoutStream d_;
};

}  // namespace

Tensor bias_dropout_add_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual, double p, bool training,
                                   uint64_t seed, uint64_t subsequence, const int64_t* step, const Tensor& weight,
                                   const Tensor& ln_bias, double eps) {
  constexpr const char* op = "bias_dropout_add_layer_norm";
  OpScope scope(op);
  TANDEM_CHECK(x.defined() && bias.defined() && residual.defined(), "{}: input, bias and residual must be defined", op);
  TANDEM_CHECK(is_floating(x.dtype()), "{}: input must be floating, got {}", op, x.str());
  check_same_device_and_dtype(op, {&x, &bias, &residual});
  check_same_shape(op, x, residual);
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) > 0 && bias.dim() == 1 && bias.size(0) == x.size(-1),
               "{}: bias {} must be [D] for input {} [..., D] with D > 0", op, bias.str(), x.str());
  check_same_device_and_dtype(op, {&weight, &ln_bias});
  TANDEM_CHECK(x.device() == weight.device(), "{}: input is on {} but weight on {}", op, x.device().str(),
               weight.device().str());
  TANDEM_CHECK(weight.dtype() == x.dtype() || weight.dtype() == DType::F32,
               "{}: weight must be {} or f32 for input {}, got {}", op, dtype_name(x.dtype()), x.str(), weight.str());
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  TANDEM_CHECK(weight.shape() == Shape{dim} && ln_bias.shape() == Shape{dim},
               "{}: weight {} and bias {} must be [{}] for input {}", op, weight.str(), ln_bias.str(), dim, x.str());
  TANDEM_CHECK(eps >= 0, "{}: eps must be >= 0, got {}", op, eps);
  const DropoutStream d = dropout_stream(op, p, training, seed, subsequence, step);
  const bool need_grad = any_requires_grad({&x, &bias, &residual, &weight, &ln_bias});
  const DType st = acc_dtype(x.dtype());
  Tensor s = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, rstd;
  if (need_grad) {
    mean = Tensor::empty({rows}, st, x.device());
    rstd = Tensor::empty({rows}, st, x.device());
  }
  if (x.device().is_cpu()) {
    bias_dropout_add_forward_cpu(x.data_ptr(), bias.data_ptr(), residual.data_ptr(), s.data_ptr(), x.dtype(), rows, dim,
                                 d.p, d.seed, d.host_subsequence());
    layer_norm_forward_cpu(s.data_ptr(), weight.data_ptr(), ln_bias.data_ptr(), y.data_ptr(), mut_ptr(mean),
                           mut_ptr(rstd), rows, dim, eps, x.dtype(), weight.dtype());
  } else if (fused_on_gpu()) {
    TANDEM_CUDA_ONLY(bias_dropout_add_layer_norm_forward_cuda(
        x.data_ptr(), bias.data_ptr(), residual.data_ptr(), s.data_ptr(), d.p, d.seed, d.subsequence, d.step,
        weight.data_ptr(), ln_bias.data_ptr(), y.data_ptr(), mut_ptr(mean), mut_ptr(rstd), rows, dim, eps, x.dtype(),
        weight.dtype(), stream_of(x)));
  } else {
    TANDEM_CUDA_ONLY(bias_dropout_add_forward_cuda(x.data_ptr(), bias.data_ptr(), residual.data_ptr(), s.data_ptr(),
                                                   x.dtype(), rows, dim, d.p, d.seed, d.subsequence, d.step,
                                                   stream_of(x)));
    TANDEM_CUDA_ONLY(layer_norm_forward_cuda(s.data_ptr(), weight.data_ptr(), ln_bias.data_ptr(), y.data_ptr(),
                                             mut_ptr(mean), mut_ptr(rstd), rows, dim, eps, x.dtype(), weight.dtype(),
                                             stream_of(x)));
  }
  if (need_grad)
    std::make_shared<BiasDropoutAddLayerNormBackward>(s, weight, mean, rstd, d)
        ->connect({&x, &bias, &residual, &weight, &ln_bias}, {&y});
  return y;
}

}  // namespace tandem::kernels
