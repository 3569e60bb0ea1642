#include "kernels/elementwise.h"

#include "core/autograd/node.h"
#include "core/check.h"
#include "core/copy_kernels.h"
#include "core/op_scope.h"
#include "kernels/checks.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/elementwise_cuda.h"
#endif

namespace tandem::kernels {

namespace {

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.device().is_cpu()) {
    binary_cpu(op, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.dtype(), a.numel());
  } else {
    TANDEM_CUDA_ONLY(binary_cuda(op, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.dtype(), a.numel(),
                                 stream_of(a)));
  }
  return out;
}

Tensor scaled(const Tensor& x, double alpha) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    scale_cpu(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel(), alpha);
  } else {
    TANDEM_CUDA_ONLY(scale_cuda(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel(), alpha, stream_of(x)));
  }
  return out;
}

class AddBackward final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {g[0], g[0]}; }
  std::string name() const override { return "AddBackward"; }
};

class MulBackward final : public Node {
 public:
  MulBackward(const Tensor& a, const Tensor& b, bool need_a, bool need_b)
      : a_(need_b ? SavedTensor(a) : SavedTensor()), b_(need_a ? SavedTensor(b) : SavedTensor()) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor ga, gb;
    if (next_edges_[0].valid()) ga = binary(BinaryOp::Mul, g[0], b_.unpack(*this));
    if (next_edges_[1].valid()) gb = binary(BinaryOp::Mul, g[0], a_.unpack(*this));
    return {ga, gb};
  }
  void release_saved() override {
    a_.release();
    b_.release();
  }
  std::string name() const override { return "MulBackward"; }

 private:
  SavedTensor a_, b_;  // a is needed for b's gradient and vice versa
};

class ScaleBackward final : public Node {
 public:
  explicit ScaleBackward(double alpha) : alpha_(alpha) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {scaled(g[0], alpha_)}; }
  std::string name() const override { return "ScaleBackward"; }

 private:
  double alpha_;
};

class ReluBackward final : public Node {
 public:
  explicit ReluBackward(const Tensor& x) : x_(x) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    Tensor x = x_.unpack(*this);
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (x.device().is_cpu()) {
      relu_backward_cpu(g[0].data_ptr(), x.data_ptr(), dx.data_ptr(), x.dtype(), x.numel());
    } else {
      TANDEM_CUDA_ONLY(
          relu_backward_cuda(g[0].data_ptr(), x.data_ptr(), dx.data_ptr(), x.dtype(), x.numel(), stream_of(x)));
    }
    return {dx};
  }
  void release_saved() override { x_.release(); }
  std::string name() const override { return "ReluBackward"; }

 private:
  SavedTensor x_;
};

class CastBackward final : public Node {
 public:
  explicit CastBackward(DType from) : from_(from) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override { return {g[0].to(from_)}; }
  std::string name() const override { return "CastBackward"; }

 private:
  DType from_;
};

#if TANDEM_WITH_CUDA
// f32 to 16 bits in one launch for the list; other pairs tensor by tensor (copy_ converts).
void cast_many_on_gpu(const std::vector<Tensor>& xs, const std::vector<Tensor>& outs, DType dtype) {
  if (xs[0].dtype() == DType::F32 && (dtype == DType::BF16 || dtype == DType::F16)) {
    std::vector<cast_many_plan::Entry> entries;
    for (size_t i = 0; i < xs.size(); ++i)
      entries.push_back({static_cast<const float*>(xs[i].data_ptr()), outs[i].data_ptr(), xs[i].numel()});
    cast_many_cuda(entries, dtype, stream_of(xs[0]));
    return;
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    Tensor out = outs[i];
    out.copy_(xs[i]);
  }
}
#endif

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  OpScope scope("add");
  check_same_device_and_dtype("add", {&a, &b});
  check_same_shape("add", a, b);
  Tensor out = binary(BinaryOp::Add, a, b);
  if (any_requires_grad({&a, &b})) std::make_shared<AddBackward>()->connect({&a, &b}, {&out});
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  OpScope scope("mul");
  check_same_device_and_dtype("mul", {&a, &b});
  check_same_shape("mul", a, b);
  Tensor out = binary(BinaryOp::Mul, a, b);
  if (any_requires_grad({&a, &b}))
    std::make_shared<MulBackward>(a, b, a.requires_grad(), b.requires_grad())->connect({&a, &b}, {&out});
  return out;
}

Tensor scale(const Tensor& x, double alpha) {
  OpScope scope("scale");
  check_same_device_and_dtype("scale", {&x});
  Tensor out = scaled(x, alpha);
  if (any_requires_grad({&x})) std::make_shared<ScaleBackward>(alpha)->connect({&x}, {&out});
  return out;
}

Tensor relu(const Tensor& x) {
  OpScope scope("relu");
  check_same_device_and_dtype("relu", {&x});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.device().is_cpu()) {
    relu_forward_cpu(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel());
  } else {
    TANDEM_CUDA_ONLY(relu_forward_cuda(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel(), stream_of(x)));
  }
  if (any_requires_grad({&x})) std::make_shared<ReluBackward>(x)->connect({&x}, {&out});
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  OpScope scope("cast");
  check_same_device_and_dtype("cast", {&x});
  TANDEM_CHECK(!x.requires_grad() || is_floating(dtype), "cast of {} to {}: gradients need a floating type", x.str(),
               dtype_name(dtype));
  Tensor out = x.dtype() == dtype ? x.clone() : x.to(dtype);
  if (any_requires_grad({&x})) std::make_shared<CastBackward>(x.dtype())->connect({&x}, {&out});
  return out;
}

std::vector<Tensor> cast_many(const std::vector<Tensor>& xs, DType dtype) {
  if (xs.empty()) return {};  // an f32 forward's: no op to report
  OpScope scope("cast_many");
  for (const Tensor& x : xs) {
    TANDEM_CHECK(x.defined(), "cast_many: an undefined tensor in the list");
    TANDEM_CHECK(x.dtype() == xs[0].dtype() && x.device() == xs[0].device(),
                 "cast_many: {} ('{}') is not of the first tensor's dtype and device ({})", x.str(), x.name(),
                 xs[0].str());
  }
  // Slots start at multiples of 8 elements: 16 bytes of a 16-bit dtype, the kernel's vector width.
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const Tensor& x : xs) {
    offsets.push_back(total);
    total += (x.numel() + 7) / 8 * 8;
  }
  const Tensor flat = Tensor::empty({total}, dtype, xs[0].device());
  std::vector<Tensor> outs;
  for (size_t i = 0; i < xs.size(); ++i) outs.push_back(flat.view_range(offsets[i], xs[i].shape()));

  const DType from = xs[0].dtype();
  if (xs[0].device().is_cpu()) {
    for (size_t i = 0; i < xs.size(); ++i)
      convert_host(xs[i].data_ptr(), from, outs[i].data_ptr(), dtype, xs[i].numel());
  } else {
    TANDEM_CUDA_ONLY(cast_many_on_gpu(xs, outs, dtype));
  }
  return outs;
}

void record_cast(const Tensor& x, const Tensor& y) {
  TANDEM_CHECK(x.shape() == y.shape() && x.device() == y.device() && y.grad_fn() == nullptr && !y.requires_grad(),
               "record_cast: {} is not a new tensor of {}'s shape and device", y.str(), x.str());
  TANDEM_CHECK(!x.requires_grad() || is_floating(y.dtype()), "record_cast of {} to {}: gradients need a floating type",
               x.str(), dtype_name(y.dtype()));
  Tensor out = y;
  if (any_requires_grad({&x})) std::make_shared<CastBackward>(x.dtype())->connect({&x}, {&out});
}

}  // namespace tandem::kernels
