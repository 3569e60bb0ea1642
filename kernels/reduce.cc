#include "kernels/reduce.h"

#include <limits>

#include "core/autograd/node.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/reduce_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/reduce_cuda.h"
#endif

namespace tandem::kernels {

namespace {

Tensor scaled_sum(const Tensor& x, double scale) {
  Tensor out = Tensor::empty({}, x.dtype(), x.device());
  if (x.device().is_cpu()) {
    sum_cpu(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel(), scale);
  } else {
    TANDEM_CUDA_ONLY(sum_cuda(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel(), scale, x.device().index,
                              stream_of(x)));
  }
  return out;
}

// d(scale * sum x)/dx_i = scale: the output gradient broadcast to the input's shape.
class SumBackward final : public Node {
 public:
  SumBackward(double scale, std::string name) : scale_(scale), name_(std::move(name)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    const InputMeta& m = input_meta_[0];
    Tensor dx = Tensor::empty(m.shape, m.dtype, m.device);
    if (m.device.is_cpu()) {
      broadcast_scalar_cpu(g[0].data_ptr(), dx.data_ptr(), m.dtype, dx.numel(), scale_);
    } else {
      TANDEM_CUDA_ONLY(broadcast_scalar_cuda(g[0].data_ptr(), dx.data_ptr(), m.dtype, dx.numel(), scale_,
                                             stream_of(dx)));
    }
    return {dx};
  }
  std::string name() const override { return name_; }

 private:
  double scale_;
  std::string name_;
};

Tensor reduce(const Tensor& x, double scale, const char* op, const char* node_name) {
  check_same_device_and_dtype(op, {&x});
  Tensor out = scaled_sum(x, scale);
  if (any_requires_grad({&x})) std::make_shared<SumBackward>(scale, node_name)->connect({&x}, {&out});
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  OpScope scope("sum");
  return reduce(x, 1.0, "sum", "SumBackward");
}

Tensor mean(const Tensor& x) {
  OpScope scope("mean");
  double scale = x.numel() > 0 ? 1.0 / static_cast<double>(x.numel()) : std::numeric_limits<double>::quiet_NaN();
  return reduce(x, scale, "mean", "MeanBackward");
}

}  // namespace tandem::kernels
