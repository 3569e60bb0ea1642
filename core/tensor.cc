#include "core/tensor.h"

#include <cstring>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/check.h"
#include "core/copy_kernels.h"
#include "core/half.h"

#if TANDEM_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace tandem {

namespace {

// reshape is differentiable: the gradient is reshaped back.
class ReshapeBackward final : public Node {
 public:
  explicit ReshapeBackward(Shape input_shape) : input_shape_(std::move(input_shape)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    NoGradGuard no_grad;
    return {grads[0].reshape(input_shape_)};
  }
  std::string name() const override { return "ReshapeBackward"; }

 private:
  Shape input_shape_;
};

void check_shape(const Shape& shape) {
  for (int64_t d : shape) TANDEM_CHECK(d >= 0, "invalid shape {}: negative extent", shape_str(shape));
}

#if TANDEM_WITH_CUDA
void* current_stream_of(Device d) { return cuda::current_stream(d.index).handle(); }
#endif

template <class V>
Tensor tensor_from_values(const V& values, const Shape& shape, DType dtype, DType source_dtype, Device device) {
  check_shape(shape);
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
               "from_vector: {} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor host = Tensor::empty(shape, dtype);
  convert_host(values.data(), source_dtype, host.data_ptr(), dtype, host.numel());
  return device.is_cpu() ? host : host.to(device);
}

}  // namespace

size_t shape_bytes(const Shape& shape, DType dtype) {
  size_t bytes = 0;
  TANDEM_CHECK(!__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_size(dtype), &bytes),
               "{} {} has more bytes than a size_t can count", dtype_name(dtype), shape_str(shape));
  return bytes;
}

// --- creation -----------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, bool pinned) {
  check_shape(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(shape_bytes(shape, dtype), device, pinned);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  return tensor_from_values(values, shape, dtype, DType::F64, device);
}
Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, DType dtype, Device device) {
  return tensor_from_values(values, shape, dtype, DType::F32, device);
}
Tensor Tensor::from_vector(const std::vector<int64_t>& values, const Shape& shape, DType dtype, Device device) {
  return tensor_from_values(values, shape, dtype, DType::I64, device);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, size_t offset_bytes, const Shape& shape, DType dtype) {
  check_shape(shape);
  size_t need = 0;
  const bool overflow = __builtin_add_overflow(offset_bytes, shape_bytes(shape, dtype), &need);
  TANDEM_CHECK(storage && !overflow && need <= storage->nbytes(), "view {} {} at byte offset {} exceeds storage of {} bytes",
               dtype_name(dtype), shape_str(shape), offset_bytes, storage ? storage->nbytes() : 0);
  TANDEM_CHECK(offset_bytes % dtype_size(dtype) == 0, "view offset {} is not aligned to {} elements", offset_bytes,
               dtype_name(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->offset_bytes = offset_bytes;
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// --- metadata -----------------------------------------------------------------

void Tensor::check_defined(const char* what) const {
  TANDEM_CHECK(impl_ != nullptr, "{} called on an undefined tensor", what);
}

const Shape& Tensor::shape() const {
  check_defined("shape");
  return impl_->shape;
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  int64_t k = d < 0 ? d + n : d;
  TANDEM_CHECK(k >= 0 && k < n, "dimension {} out of range for a {}-dimensional tensor", d, n);
  return impl_->shape[static_cast<size_t>(k)];
}

DType Tensor::dtype() const {
  check_defined("dtype");
  return impl_->dtype;
}

Device Tensor::device() const {
  check_defined("device");
  return impl_->storage->device();
}

size_t Tensor::offset_bytes() const {
  check_defined("offset_bytes");
  return impl_->offset_bytes;
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  check_defined("storage");
  return impl_->storage;
}

const std::string& Tensor::name() const {
  check_defined("name");
  return impl_->name;
}

Tensor& Tensor::set_name(std::string name) {
  check_defined("set_name");
  impl_->name = std::move(name);
  return *this;
}

std::string Tensor::str() const {
  if (!impl_) return "undefined";
  return fmt::format("{}{} {}", dtype_name(dtype()), shape_str(shape()), device().str());
}

void* Tensor::data_ptr() const {
  check_defined("data_ptr");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset_bytes;
}

namespace {
template <class T>
constexpr bool dtype_matches(DType t) {
  if constexpr (std::is_same_v<T, float>) return t == DType::F32;
  else if constexpr (std::is_same_v<T, double>) return t == DType::F64;
  else if constexpr (std::is_same_v<T, Half>) return t == DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>) return t == DType::BF16;
  else if constexpr (std::is_same_v<T, int32_t>) return t == DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return t == DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>) return t == DType::U8;
  else return false;
}
}  // namespace

template <class T>
T* Tensor::data() const {
  TANDEM_CHECK(dtype_matches<T>(dtype()), "data<T>(): tensor {} has a different element type", str());
  return static_cast<T*>(data_ptr());
}

template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template Half* Tensor::data<Half>() const;
template BFloat16* Tensor::data<BFloat16>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template uint8_t* Tensor::data<uint8_t>() const;

// --- views --------------------------------------------------------------------

Tensor Tensor::reshape(const Shape& new_shape) const {
  check_defined("reshape");
  Shape s = new_shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TANDEM_CHECK(infer < 0, "reshape {}: only one extent can be -1", shape_str(new_shape));
      infer = static_cast<int>(i);
    } else {
      TANDEM_CHECK(s[i] >= 0, "reshape {}: invalid extent", shape_str(new_shape));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    TANDEM_CHECK(known > 0 && numel() % known == 0, "reshape {} cannot hold {} elements", shape_str(new_shape),
                 numel());
    s[static_cast<size_t>(infer)] = numel() / known;
  }
  TANDEM_CHECK(shape_numel(s) == numel(), "reshape of {} to {}: element counts differ", str(), shape_str(new_shape));
  Tensor out = from_storage(impl_->storage, impl_->offset_bytes, s, impl_->dtype);
  if (GradMode::enabled() && requires_grad()) {
    auto node = std::make_shared<ReshapeBackward>(impl_->shape);
    node->connect({this}, {&out});
  }
  return out;
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  check_defined("narrow");
  TANDEM_CHECK(dim() >= 1, "narrow needs at least one dimension, got {}", str());
  TANDEM_CHECK(start >= 0 && length >= 0 && start + length <= impl_->shape[0],
               "narrow [{}, {}) out of range for {}", start, start + length, str());
  Shape s = impl_->shape;
  s[0] = length;
  int64_t row = shape_numel(impl_->shape) / (impl_->shape[0] ? impl_->shape[0] : 1);
  return view_range(start * row, s);
}

Tensor Tensor::view_range(int64_t offset_elems, const Shape& shape) const {
  check_defined("view_range");
  TANDEM_CHECK(!(GradMode::enabled() && requires_grad()),
               "view_range/narrow of {} which requires grad: these views are not differentiable; "
               "detach() it or use NoGradGuard", str());
  TANDEM_CHECK(offset_elems >= 0, "view_range: negative offset {}", offset_elems);
  size_t off = impl_->offset_bytes + static_cast<size_t>(offset_elems) * dtype_size(impl_->dtype);
  return from_storage(impl_->storage, off, shape, impl_->dtype);
}

Tensor Tensor::detach() const {
  check_defined("detach");
  return from_storage(impl_->storage, impl_->offset_bytes, impl_->shape, impl_->dtype);
}

// --- copies -------------------------------------------------------------------

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  src.check_defined("copy_ (source)");
  TANDEM_CHECK(numel() == src.numel(), "copy_: source {} and destination {} differ in size", src.str(), str());
  bump_version();
  const int64_t n = numel();
  if (n == 0) return *this;
  Device dd = device(), sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) {
    convert_host(src.data_ptr(), src.dtype(), data_ptr(), dtype(), n);
    return *this;
  }
#if TANDEM_WITH_CUDA
  if (dd.is_cuda() && sd.is_cuda()) {
    void* stream = current_stream_of(dd);
    if (dd.index == sd.index) {
      convert_cuda(src.data_ptr(), src.dtype(), data_ptr(), dtype(), n, stream);
    } else {
      Tensor same_type = src.dtype() == dtype() ? src : src.to(dtype());
      TANDEM_CUDA_CHECK(cudaMemcpyPeerAsync(data_ptr(), dd.index, same_type.data_ptr(), sd.index, nbytes(),
                                            static_cast<cudaStream_t>(stream)));
    }
    return *this;
  }
  if (dd.is_cuda()) {  // host -> device: convert on the host first, so only dtype(dst) bytes cross the bus
    Tensor staged = src.dtype() == dtype() ? src : src.to(dtype());
    auto stream = static_cast<cudaStream_t>(current_stream_of(dd));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(data_ptr(), staged.data_ptr(), nbytes(), cudaMemcpyHostToDevice, stream));
    // A pageable or temporary source must outlive the copy.
    if (!staged.storage()->pinned() || !staged.is_same(src)) TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
    return *this;
  }
  // device -> host: convert on the device, copy, and wait so the host can read the result.
  cuda::StreamGuard guard(cuda::current_stream(sd.index));
  Tensor staged = src.dtype() == dtype() ? src : src.to(dtype());
  auto stream = static_cast<cudaStream_t>(current_stream_of(sd));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(data_ptr(), staged.data_ptr(), nbytes(), cudaMemcpyDeviceToHost, stream));
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *this;
#else
  TANDEM_FAIL("copy_ between {} and {}: Tandem was built without CUDA", src.str(), str());
#endif
}

Tensor Tensor::to(Device d) const { return to(d, dtype()); }
Tensor Tensor::to(DType t) const { return to(device(), t); }

Tensor Tensor::to(Device d, DType t) const {
  check_defined("to");
  Tensor out = empty(shape(), t, d);
  out.copy_(*this);
  return out;
}

Tensor Tensor::clone() const { return to(device(), dtype()); }

Tensor& Tensor::fill_(double value) {
  check_defined("fill_");
  bump_version();
  if (device().is_cpu()) {
    fill_host(data_ptr(), dtype(), numel(), value);
  } else {
#if TANDEM_WITH_CUDA
    fill_cuda(data_ptr(), dtype(), numel(), value, current_stream_of(device()));
#endif
  }
  return *this;
}

void Tensor::set_data(const Tensor& src) {
  check_defined("set_data");
  src.check_defined("set_data (source)");
  TANDEM_CHECK(!impl_->grad_fn, "set_data on {}: only leaf tensors can be re-pointed", str());
  TANDEM_CHECK(!impl_->requires_grad || is_floating(src.dtype()), "set_data: {} requires grad but the new data is {}",
               str(), dtype_name(src.dtype()));
  impl_->storage = src.impl_->storage;
  impl_->offset_bytes = src.impl_->offset_bytes;
  impl_->shape = src.impl_->shape;
  impl_->dtype = src.impl_->dtype;
}

std::vector<double> Tensor::to_double_vector() const {
  check_defined("to_double_vector");
  Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  std::vector<double> out(static_cast<size_t>(numel()));
  convert_host(host.data_ptr(), dtype(), out.data(), DType::F64, numel());
  return out;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  check_defined("to_int_vector");
  Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  convert_host(host.data_ptr(), dtype(), out.data(), DType::I64, numel());
  return out;
}

double Tensor::item() const {
  TANDEM_CHECK(numel() == 1, "item() needs exactly one element, got {}", str());
  return to_double_vector()[0];
}

// --- autograd -----------------------------------------------------------------

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  check_defined("set_requires_grad");
  TANDEM_CHECK(!impl_->grad_fn, "set_requires_grad on {}: only leaf tensors can be marked (this one has a grad_fn)",
               str());
  TANDEM_CHECK(!requires_grad || is_floating(dtype()), "set_requires_grad on {}: only floating tensors have gradients",
               str());
  impl_->requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return impl_ && !impl_->grad_fn; }

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  check_defined("grad_fn");
  return impl_->grad_fn;
}

Tensor Tensor::grad() const {
  check_defined("grad");
  return Tensor(impl_->grad_impl);
}

void Tensor::set_grad(const Tensor& grad) {
  check_defined("set_grad");
  if (grad.defined()) {
    TANDEM_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(),
                 "set_grad: gradient {} does not match tensor {}{}", grad.str(), str(),
                 impl_->name.empty() ? "" : " (" + impl_->name + ")");
  }
  impl_->grad_impl = grad.impl_;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  run_backward({*this}, {gradient}, retain_graph);
}

uint64_t Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  check_defined("register_post_accumulate_grad_hook");
  TANDEM_CHECK(is_leaf() && requires_grad(),
               "post-accumulate-grad hooks can only be registered on leaf tensors that require grad ({})", str());
  static std::atomic<uint64_t> next_handle{1};
  uint64_t h = next_handle.fetch_add(1);
  impl_->post_accumulate_hooks.emplace_back(h, std::move(hook));
  return h;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t handle) {
  check_defined("remove_post_accumulate_grad_hook");
  auto& hooks = impl_->post_accumulate_hooks;
  std::erase_if(hooks, [&](const auto& p) { return p.first == handle; });
}

}  // namespace tandem
