#include "kernels/gelu.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/gelu_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/gelu_cuda.h"
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

class BiasGeluBackward final : public Node {
 public:
  BiasGeluBackward(const Tensor& x, const Tensor& b, GeluApproximation approx) : x_(x), b_(b), approx_(approx) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this), b = b_.unpack(*this);
    const int64_t dim = b.numel(), rows = x.numel() / dim;
    Tensor dx, db;
    if (next_edges_[0].valid()) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (next_edges_[1].valid()) db = Tensor::empty(b.shape(), b.dtype(), b.device());
    void* pdx = dx.defined() ? dx.data_ptr() : nullptr;
    void* pdb = db.defined() ? db.data_ptr() : nullptr;
    if (x.device().is_cpu()) {
      bias_gelu_backward_cpu(g[0].data_ptr(), x.data_ptr(), b.data_ptr(), pdx, pdb, x.dtype(), rows, dim, approx_);
    } else {
      TANDEM_CUDA_ONLY(bias_gelu_backward_cuda(g[0].data_ptr(), x.data_ptr(), b.data_ptr(), pdx, pdb, x.dtype(), rows,
                                               dim, approx_, x.device().index, stream_of(x)));
    }
    return {dx, db};
  }
  void release_saved() override {
    x_.release();
    b_.release();
  }
  std::string name() const override { return "BiasGeluBackward"; }

 private:
  SavedTensor x_, b_;
  GeluApproximation approx_;
};

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
  check_same_device_and_dtype("bias_gelu", {&x, &bias});
  TANDEM_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1) && bias.size(0) > 0,
               "bias_gelu: bias {} must be [D] for input {} [..., D] with D > 0", bias.str(), x.str());
  const int64_t dim = bias.size(0), rows = x.numel() / dim;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    bias_gelu_forward_cpu(x.data_ptr(), bias.data_ptr(), y.data_ptr(), x.dtype(), rows, dim, approx);
  } else {
    TANDEM_CUDA_ONLY(bias_gelu_forward_cuda(x.data_ptr(), bias.data_ptr(), y.data_ptr(), x.dtype(), rows, dim, approx,
                                            stream_of(x)));
  }
  if (any_requires_grad({&x, &bias})) std::make_shared<BiasGeluBackward>(x, bias, approx)->connect({&x, &bias}, {&y});
  return y;
}

}  // namespace tandem::kernels
