#include "kernels/layer_norm.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/acc_dtype.h"
#include "kernels/checks.h"
#include "kernels/cpu/layer_norm_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/layer_norm_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class LayerNormBackward final : public Node {
 public:
  LayerNormBackward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd)
      : x_(x), weight_(weight), mean_(mean), rstd_(rstd) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this), w = weight_.unpack(*this), mean = mean_.unpack(*this), rstd = rstd_.unpack(*this);
    const Tensor& dy = g[0];
    const int64_t dim = x.size(-1), rows = x.numel() / (dim > 0 ? dim : 1);
    Tensor dx, dw, db;
    if (next_edges_[0].valid()) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (next_edges_[1].valid()) dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    if (next_edges_[2].valid()) db = Tensor::empty(w.shape(), w.dtype(), w.device());
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
    if (x.device().is_cpu()) {
      layer_norm_backward_cpu(dy.data_ptr(), x.data_ptr(), w.data_ptr(), mean.data_ptr(), rstd.data_ptr(), ptr(dx),
                              ptr(dw), ptr(db), rows, dim, x.dtype(), w.dtype());
    } else {
      TANDEM_CUDA_ONLY(layer_norm_backward_cuda(dy.data_ptr(), x.data_ptr(), w.data_ptr(), mean.data_ptr(),
                                                rstd.data_ptr(), ptr(dx), ptr(dw), ptr(db), rows, dim, x.dtype(),
                                                w.dtype(), x.device().index, stream_of(x)));
    }
    return {dx, dw, db};
  }
  void release_saved() override {
    x_.release();
    weight_.release();
    mean_.release();
    rstd_.release();
  }
  std::string name() const override { return "LayerNormBackward"; }

 private:
  SavedTensor x_, weight_, mean_, rstd_;
};

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  OpScope scope("layer_norm");
  check_same_device_and_dtype("layer_norm weight and bias", {&weight, &bias});
  TANDEM_CHECK(x.defined(), "layer_norm: input is undefined");
  TANDEM_CHECK(is_floating(x.dtype()), "layer_norm: input must be floating, got {}", x.str());
  TANDEM_CHECK(x.device() == weight.device(), "layer_norm: input is on {} but weight on {}", x.device().str(),
               weight.device().str());
  TANDEM_CHECK(weight.dtype() == x.dtype() || weight.dtype() == DType::F32,
               "layer_norm: weight must be {} or f32 for input {}, got {}", dtype_name(x.dtype()), x.str(),
               weight.str());
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: input {} needs a non-empty last dimension", x.str());
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  TANDEM_CHECK(weight.shape() == Shape{dim} && bias.shape() == Shape{dim},
               "layer_norm: weight {} and bias {} must be [{}] for input {}", weight.str(), bias.str(), dim, x.str());
  TANDEM_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got {}", eps);
  const bool need_grad = any_requires_grad({&x, &weight, &bias});
  const DType st = acc_dtype(x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, rstd;
  if (need_grad) {
    mean = Tensor::empty({rows}, st, x.device());
    rstd = Tensor::empty({rows}, st, x.device());
  }
  void* pm = need_grad ? mean.data_ptr() : nullptr;
  void* pr = need_grad ? rstd.data_ptr() : nullptr;
  if (x.device().is_cpu()) {
    layer_norm_forward_cpu(x.data_ptr(), weight.data_ptr(), bias.data_ptr(), y.data_ptr(), pm, pr, rows, dim, eps,
                           x.dtype(), weight.dtype());
  } else {
    TANDEM_CUDA_ONLY(layer_norm_forward_cuda(x.data_ptr(), weight.data_ptr(), bias.data_ptr(), y.data_ptr(), pm, pr,
                                             rows, dim, eps, x.dtype(), weight.dtype(), stream_of(x)));
  }
  if (need_grad) std::make_shared<LayerNormBackward>(x, weight, mean, rstd)->connect({&x, &weight, &bias}, {&y});
  return y;
}

}  // namespace tandem::kernels
