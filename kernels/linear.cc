#include "kernels/linear.h"

#include <optional>

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

// dw_dtype, db_dtype: the gradients' (a master's under LinearParameter(values, master), else x's); a
// db_dtype means the node has a third input, b. bias_in_gemm: b's gradient is asked of dw's GEMM
// (linear_deferred_bias: the bias was added by the next op, not here).
class LinearBackward final : public Node {
 public:
  LinearBackward(const Tensor& x, const Tensor& w, DType dw_dtype, std::optional<DType> db_dtype,
                 bool bias_in_gemm = false)
      : x_(x), w_(w), dw_dtype_(dw_dtype), db_dtype_(db_dtype), bias_in_gemm_(bias_in_gemm) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this), w = w_.unpack(*this);
    const Tensor& dy = g[0];
    const int64_t out = w.size(0), in = w.size(1), rows = leading_rows(x);
    Tensor dx, dw, db;
    if (next_edges_[0].valid()) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (next_edges_[1].valid()) dw = Tensor::empty(w.shape(), dw_dtype_, w.device());
    if (db_dtype_ && next_edges_[2].valid()) db = Tensor::empty({out}, *db_dtype_, w.device());
    const DType db_dtype = db_dtype_.value_or(x.dtype());  // without a bias, unused
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
    if (x.device().is_cpu()) {
      linear_backward_cpu(dy.data_ptr(), x.data_ptr(), w.data_ptr(), ptr(dx), ptr(dw), ptr(db), rows, in, out,
                          x.dtype(), dw_dtype_, db_dtype);
    } else {
      TANDEM_CUDA_ONLY(linear_backward_cuda(dy.data_ptr(), x.data_ptr(), w.data_ptr(), ptr(dx), ptr(dw), ptr(db),
                                            rows, in, out, x.dtype(), dw_dtype_, db_dtype, x.device().index,
                                            stream_of(x), bias_in_gemm_));
    }
    if (db_dtype_) return {dx, dw, db};
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
  std::optional<DType> db_dtype_;
  bool bias_in_gemm_;
};

// A parameter given with a master: values without history, the master of values' shape and device in f32
// (or f64 on the CPU).
void check_master(const char* op, const char* what, const LinearParameter& p) {
  if (!p.master.defined()) return;
  const Tensor &v = p.values, &m = p.master;
  // The master takes the gradient that values would have had: values with history would lose it.
  TANDEM_CHECK(!v.requires_grad(), "{}: {} values {} given with a master must have no autograd history", op, what,
               v.str());
  TANDEM_CHECK(m.shape() == v.shape() && m.device() == v.device(),
               "{}: master {} {} must have the shape and device of its values {}", op, what, m.str(), v.str());
  const bool host = m.device().is_cpu();
  TANDEM_CHECK(m.dtype() == DType::F32 || (host && m.dtype() == DType::F64), "{}: master {} {} must be f32{}", op,
               what, m.str(), host ? " or f64" : " on a GPU");
}

void check_linear(const char* op, const Tensor& x, const LinearParameter& lw, const LinearParameter& lb) {
  const Tensor &w = lw.values, &b = lb.values;
  if (b.defined()) check_same_device_and_dtype(op, {&x, &w, &b});
  else check_same_device_and_dtype(op, {&x, &w});
  TANDEM_CHECK(w.dim() == 2, "{}: weight must be [out, in], got {}", op, w.str());
  TANDEM_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), "{}: input {} does not end in in_features={} of weight {}", op,
               x.str(), w.size(1), w.str());
  TANDEM_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), "{}: bias {} must be [{}]", op,
               b.defined() ? b.str() : "", w.size(0));
  check_master(op, "weight", lw);
  check_master(op, "bias", lb);
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

// The node of y = x w^T (+ b), connected to x and to where w's and b's gradients go.
void record(const Tensor& x, const LinearParameter& w, const LinearParameter& b, bool bias_in_gemm, Tensor& y) {
  const Tensor &wg = w.gradient_to(), &bg = b.gradient_to();
  if (b.defined()) {
    if (any_requires_grad({&x, &wg, &bg}))
      std::make_shared<LinearBackward>(x, w.values, wg.dtype(), bg.dtype(), bias_in_gemm)
          ->connect({&x, &wg, &bg}, {&y});
  } else if (any_requires_grad({&x, &wg})) {
    std::make_shared<LinearBackward>(x, w.values, wg.dtype(), std::nullopt)->connect({&x, &wg}, {&y});
  }
}

}  // namespace

Tensor linear(const Tensor& x, const LinearParameter& w, const LinearParameter& b) {
  OpScope scope("linear");
  check_linear("linear", x, w, b);
  Tensor y = product(x, w.values, b.defined() ? b.values.data_ptr() : nullptr);
  record(x, w, b, /*bias_in_gemm=*/false, y);
  return y;
}

Tensor linear_deferred_bias(const Tensor& x, const LinearParameter& w, const LinearParameter& b) {
  OpScope scope("linear");  // the same op in traces and op tables: only its backward's bias sum moved
  TANDEM_CHECK(b.defined(), "linear_deferred_bias: the bias must be defined");
  check_linear("linear_deferred_bias", x, w, b);
  Tensor y = product(x, w.values, nullptr);
  record(x, w, b, /*bias_in_gemm=*/true, y);
  return y;
}

}  // namespace tandem::kernels
