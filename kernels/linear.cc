#include "kernels/linear.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/linear_cuda.h"
#endif

namespace tandem::kernels {

namespace {

// Rows of x viewed as a matrix [rows, in]: the product of all but the last extent.
int64_t leading_rows(const Tensor& x) {
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  return shape_numel(lead);
}

// has_bias: the node has a third input, b. bias_in_gemm: its gradient is asked of dw's GEMM
// (linear_deferred_bias: the bias was added by the next op, not here). dw_dtype: the weight gradient's
// (the master weight's under LinearWeight(values, master), else w's).
class LinearBackward final : public Node {
 public:
  LinearBackward(const Tensor& x, const Tensor& w, DType dw_dtype, bool has_bias, bool bias_in_gemm = false)
      : x_(x), w_(w), dw_dtype_(dw_dtype), has_bias_(has_bias), bias_in_gemm_(bias_in_gemm) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this), w = w_.unpack(*this);
    const Tensor& dy = g[0];
    const int64_t out = w.size(0), in = w.size(1), rows = leading_rows(x);
    Tensor dx, dw, db;
    if (next_edges_[0].valid()) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (next_edges_[1].valid()) dw = Tensor::empty(w.shape(), dw_dtype_, w.device());
    if (has_bias_ && next_edges_[2].valid()) db = Tensor::empty({out}, w.dtype(), w.device());
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
    if (x.device().is_cpu()) {
      linear_backward_cpu(dy.data_ptr(), x.data_ptr(), w.data_ptr(), ptr(dx), ptr(dw), ptr(db), rows, in, out,
                          x.dtype(), dw_dtype_);
    } else {
      TANDEM_CUDA_ONLY(linear_backward_cuda(dy.data_ptr(), x.data_ptr(), w.data_ptr(), ptr(dx), ptr(dw), ptr(db),
                                            rows, in, out, x.dtype(), dw_dtype_, x.device().index, stream_of(x),
                                            bias_in_gemm_));
    }
    if (has_bias_) return {dx, dw, db};
    return {dx, dw};
  }
  void release_saved() override {
    x_.release();
    w_.release();
  }
  std::string name() const override { return "LinearBackward"; }

 private:
  SavedTensor x_, w_;
  DType dw_dtype_;
  bool has_bias_, bias_in_gemm_;
};

void check_linear(const char* op, const Tensor& x, const LinearWeight& lw, const Tensor& b) {
  const Tensor& w = lw.values;
  if (b.defined()) check_same_device_and_dtype(op, {&x, &w, &b});
  else check_same_device_and_dtype(op, {&x, &w});
  TANDEM_CHECK(w.dim() == 2, "{}: weight must be [out, in], got {}", op, w.str());
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), "{}: input {} does not end in in_features={} of weight {}", op,
               x.str(), w.size(1), w.str());
  TANDEM_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), "{}: bias {} must be [{}]", op,
               b.defined() ? b.str() : "", w.size(0));
  if (!lw.master.defined()) return;
  const Tensor& m = lw.master;
  // The master takes the gradient that values would have had: values with history would lose it.
  TANDEM_CHECK(!w.requires_grad(), "{}: weight values {} given with a master weight must have no autograd history",
               op, w.str());
  TANDEM_CHECK(m.shape() == w.shape() && m.device() == w.device(),
               "{}: master weight {} must have the shape and device of the weight values {}", op, m.str(), w.str());
  const bool host = m.device().is_cpu();
  TANDEM_CHECK(m.dtype() == DType::F32 || (host && m.dtype() == DType::F64),
               "{}: master weight {} must be f32{}", op, m.str(), host ? " or f64" : " on a GPU");
}

// y = x w^T (+ b where `bias` is given), on x's device.
Tensor product(const Tensor& x, const Tensor& w, const void* bias) {
  const int64_t out = w.size(0), in = w.size(1), rows = leading_rows(x);
  Shape ys = x.shape();
  ys.back() = out;
  Tensor y = Tensor::empty(ys, x.dtype(), x.device());
  if (x.device().is_cpu()) {
    linear_forward_cpu(x.data_ptr(), w.data_ptr(), bias, y.data_ptr(), rows, in, out, x.dtype());
  } else {
    TANDEM_CUDA_ONLY(linear_forward_cuda(x.data_ptr(), w.data_ptr(), bias, y.data_ptr(), rows, in, out, x.dtype(),
                                         x.device().index, stream_of(x)));
  }
  return y;
}

}  // namespace

Tensor linear(const Tensor& x, const LinearWeight& w, const Tensor& b) {
  OpScope scope("linear");
  check_linear("linear", x, w, b);
  Tensor y = product(x, w.values, b.defined() ? b.data_ptr() : nullptr);
  const Tensor& wg = w.gradient_to();
  if (b.defined()) {
    if (any_requires_grad({&x, &wg, &b}))
      std::make_shared<LinearBackward>(x, w.values, wg.dtype(), true)->connect({&x, &wg, &b}, {&y});
  } else if (any_requires_grad({&x, &wg})) {
    std::make_shared<LinearBackward>(x, w.values, wg.dtype(), false)->connect({&x, &wg}, {&y});
  }
  return y;
}

Tensor linear_deferred_bias(const Tensor& x, const LinearWeight& w, const Tensor& b) {
  OpScope scope("linear");  // the same op in traces and op tables: only its backward's bias sum moved
  TANDEM_CHECK(b.defined(), "linear_deferred_bias: the bias must be defined");
  check_linear("linear_deferred_bias", x, w, b);
  Tensor y = product(x, w.values, nullptr);
  const Tensor& wg = w.gradient_to();
  if (any_requires_grad({&x, &wg, &b}))
    std::make_shared<LinearBackward>(x, w.values, wg.dtype(), true, /*bias_in_gemm=*/true)
        ->connect({&x, &wg, &b}, {&y});
  return y;
}

}  // namespace tandem::kernels
