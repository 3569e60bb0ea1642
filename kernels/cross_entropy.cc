#include "kernels/cross_entropy.h"

#include <cmath>

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/acc_dtype.h"
#include "kernels/checks.h"
#include "kernels/cpu/cross_entropy_cpu.h"
#include "kernels/cpu/index_range_cpu.h"
#include "kernels/cpu/reduce_cpu.h"
#include "kernels/device_stream.h"
#include "kernels/index_errors.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/cross_entropy_cuda.h"
#include "kernels/cuda/reduce_cuda.h"
#endif

namespace tandem::kernels {

namespace {

class CrossEntropyBackward final : public Node {
 public:
  // dlogits in the accumulation dtype; the gradient goes out in the logits' dtype.
  CrossEntropyBackward(const Tensor& dlogits, DType logits_dtype) : dlogits_(dlogits), dtype_(logits_dtype) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor dl = dlogits_.unpack(*this);
    Tensor dz = Tensor::empty(dl.shape(), dtype_, dl.device());
    if (dl.device().is_cpu()) {
      scale_by_scalar_cpu(dl.data_ptr(), g[0].data_ptr(), dz.data_ptr(), dtype_, dl.numel());
    } else {
      TANDEM_CUDA_ONLY(
          scale_by_scalar_cuda(dl.data_ptr(), g[0].data_ptr(), dz.data_ptr(), dtype_, dl.numel(), stream_of(dl)));
    }
    return {dz};
  }
  void release_saved() override { dlogits_.release(); }
  std::string name() const override { return "CrossEntropyBackward"; }

 private:
  SavedTensor dlogits_;
  DType dtype_;
};

void check_inputs(const char* op, const Tensor& logits, const Tensor& labels) {
  check_same_device_and_dtype(op, {&logits});
  TANDEM_CHECK(is_floating(logits.dtype()), "{}: logits must be floating, got {}", op, logits.str());
  TANDEM_CHECK(logits.dim() == 2 && logits.size(0) > 0 && logits.size(1) > 0,
               "{}: logits must be [N, C] with N, C > 0, got {}", op, logits.str());
  TANDEM_CHECK(labels.defined() && (labels.dtype() == DType::I32 || labels.dtype() == DType::I64),
               "{}: labels must be i32 or i64, got {}", op, labels.defined() ? labels.str() : "undefined");
  TANDEM_CHECK(labels.shape() == Shape{logits.size(0)}, "{}: labels {} must be [{}] for logits {}", op, labels.str(),
               logits.size(0), logits.str());
  TANDEM_CHECK(labels.device() == logits.device(), "{}: labels are on {} but logits on {}", op,
               labels.device().str(), logits.device().str());
  if (labels.device().is_cpu()) {
    int64_t bad = first_out_of_range_cpu(labels.data_ptr(), labels.dtype(), labels.numel(), logits.size(1));
    TANDEM_CHECK(bad < 0, "{}: label {} of row {} is outside [0, {}) for {} classes", op,
                 index_at(labels.data_ptr(), labels.dtype(), bad), bad, logits.size(1), logits.size(1));
  } else {
    raise_pending_index_error();
  }
}

void check_class_weights(const Tensor& logits, const Tensor& w) {
  const DType want = acc_dtype(logits.dtype());
  TANDEM_CHECK(w.dtype() == want && w.shape() == Shape{logits.size(1)},
               "cross_entropy: class_weights must be {} [{}] for logits {}, got {}", dtype_name(want), logits.size(1),
               logits.str(), w.str());
  TANDEM_CHECK(w.device() == logits.device(), "cross_entropy: class_weights are on {} but logits on {}",
               w.device().str(), logits.device().str());
  TANDEM_CHECK(!w.requires_grad(), "cross_entropy: class_weights must not require grad");
  if (w.device().is_cpu()) {
    const std::vector<double> v = w.to_double_vector();
    for (size_t c = 0; c < v.size(); ++c)
      TANDEM_CHECK(std::isfinite(v[c]) && v[c] >= 0, "cross_entropy: class weight {} of class {} must be finite and >= 0",
                   v[c], c);
  }
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing, const Tensor& class_weights) {
  OpScope scope("cross_entropy");
  check_inputs("cross_entropy", logits, labels);
  TANDEM_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
               "cross_entropy: label_smoothing must be in [0, 1], got {}", label_smoothing);
  const int64_t n = logits.size(0), classes = logits.size(1);
  const DType lt = acc_dtype(logits.dtype());
  const bool need_grad = any_requires_grad({&logits});
  Tensor row_loss = Tensor::empty({n}, lt, logits.device());
  Tensor loss = Tensor::empty({}, lt, logits.device());
  // In f32 (f64 for f64), rounded to the logits' dtype only after backward has
  // scaled them by the loss's gradient: with fp16 and a loss scale, (p - q) / N
  // rounded first would underflow for large N (PyTorch's autocast runs the loss in f32).
  Tensor dlogits = need_grad ? Tensor::empty(logits.shape(), lt, logits.device()) : Tensor();
  void* pd = need_grad ? dlogits.data_ptr() : nullptr;
  const double inv_n = 1.0 / static_cast<double>(n);
  if (class_weights.defined()) {
    check_class_weights(logits, class_weights);
    if (logits.device().is_cpu()) {
      cross_entropy_weighted_forward_cpu(logits.data_ptr(), labels.data_ptr(), labels.dtype(),
                                         class_weights.data_ptr(), row_loss.data_ptr(), pd, logits.dtype(), n, classes,
                                         label_smoothing);
      sum_cpu(row_loss.data_ptr(), loss.data_ptr(), lt, n, 1.0);
    } else {
      TANDEM_CUDA_ONLY({
        Tensor row_weight = Tensor::empty({n}, DType::F32, logits.device());
        Tensor total = Tensor::empty({}, DType::F32, logits.device());
        const int device = logits.device().index;
        class_weight_of_rows_cuda(labels.data_ptr(), labels.dtype(), class_weights.data_ptr(), row_weight.data_ptr(),
                                  n, classes, stream_of(logits));
        sum_cuda(row_weight.data_ptr(), total.data_ptr(), DType::F32, n, 1.0, device, stream_of(logits));
        cross_entropy_weighted_forward_cuda(logits.data_ptr(), labels.data_ptr(), labels.dtype(),
                                            class_weights.data_ptr(), total.data_ptr(), row_loss.data_ptr(), pd,
                                            logits.dtype(), n, classes, label_smoothing, stream_of(logits));
        sum_cuda(row_loss.data_ptr(), loss.data_ptr(), lt, n, 1.0, device, stream_of(logits));
      });
    }
  } else if (logits.device().is_cpu()) {
    cross_entropy_forward_cpu(logits.data_ptr(), labels.data_ptr(), labels.dtype(), row_loss.data_ptr(), pd,
                              logits.dtype(), n, classes, label_smoothing);
    sum_cpu(row_loss.data_ptr(), loss.data_ptr(), lt, n, inv_n);
  } else {
    TANDEM_CUDA_ONLY({
      cross_entropy_forward_cuda(logits.data_ptr(), labels.data_ptr(), labels.dtype(), row_loss.data_ptr(), pd,
                                 logits.dtype(), n, classes, label_smoothing, stream_of(logits));
      sum_cuda(row_loss.data_ptr(), loss.data_ptr(), lt, n, inv_n, logits.device().index, stream_of(logits));
    });
  }
  if (need_grad) std::make_shared<CrossEntropyBackward>(dlogits, logits.dtype())->connect({&logits}, {&loss});
  return loss;
}

Tensor accuracy_count(const Tensor& logits, const Tensor& labels) {
  OpScope scope("accuracy_count");
  check_inputs("accuracy_count", logits, labels);
  const int64_t n = logits.size(0), classes = logits.size(1);
  if (logits.device().is_cpu()) {
    int64_t c = accuracy_count_cpu(logits.data_ptr(), labels.data_ptr(), labels.dtype(), logits.dtype(), n, classes);
    return Tensor::from_vector(std::vector<int64_t>{c}, {}, DType::I64);
  }
  Tensor count = Tensor::empty({}, DType::I64, logits.device());
  TANDEM_CUDA_ONLY(accuracy_count_cuda(logits.data_ptr(), labels.data_ptr(), labels.dtype(), count.data_ptr(),
                                       logits.dtype(), n, classes, stream_of(logits)));
  return count;
}

}  // namespace tandem::kernels
