#include "kernels/transpose.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/transpose_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/transpose_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class TransposeBackward final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {transpose(g[0])}; }
  std::string name() const override { return "TransposeBackward"; }
};

}  // namespace

Tensor transpose(const Tensor& x) {
  OpScope scope("transpose");
  TANDEM_CHECK(x.defined() && x.dim() == 2, "transpose: x must be a 2-D tensor, got {}",
               x.defined() ? x.str() : "undefined");
  const int64_t rows = x.size(0), cols = x.size(1);
  Tensor y = Tensor::empty({cols, rows}, x.dtype(), x.device());
  if (x.device().is_cpu()) {
    transpose_cpu(x.data_ptr(), y.data_ptr(), rows, cols, dtype_size(x.dtype()));
  } else {
    TANDEM_CUDA_ONLY(transpose_cuda(x.data_ptr(), y.data_ptr(), rows, cols, dtype_size(x.dtype()), stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<TransposeBackward>()->connect({&x}, {&y});
  return y;
}

}  // namespace tandem::kernels
