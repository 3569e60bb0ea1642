// Tensor: a typed, shaped, contiguous row-major view into shared Storage.
//
// A Tensor is a cheap handle (like torch.Tensor): copies share the same
// TensorImpl, so setting requires_grad or reading .grad() through any copy
// sees the same state. A *view* is a new TensorImpl over the same Storage at a
// byte offset with its own shape; it is how a batch is sliced and how a
// parameter's gradient lives inside a DDP bucket. All tensors are contiguous.
//
// Autograd state lives on the TensorImpl: a leaf that requires grad
// accumulates into grad() and runs its post-accumulate-grad hooks; a non-leaf
// points to the graph Node that produced it (grad_fn).
//
// Mutating methods ending in '_' bump the storage's version counter, so that
// using a tensor saved for backward after modifying it in place is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace tandem {

class Node;
class AccumulateGrad;
class Tensor;

using PostAccumulateGradHook = std::function<void(Tensor& param)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset_bytes = 0;
  Shape shape;
  DType dtype = DType::F32;

  // Autograd state.
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // set for non-leaf results of differentiable ops
  uint32_t output_nr = 0;         // which output of grad_fn this is
  std::shared_ptr<TensorImpl> grad_impl;  // the accumulated gradient of a leaf
  std::shared_ptr<AccumulateGrad> grad_accumulator;  // created on first use in a graph
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;
  std::string name;  // optional, for messages ("encoder.layers.0.attn.qkv.weight")
};

// The bytes of `shape` in `dtype`, overflow-checked (an Error naming both):
// a wrapped count would allocate too little.
size_t shape_bytes(const Shape& shape, DType dtype);

class Tensor {
 public:
  Tensor() = default;  // undefined
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- creation ------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      bool pinned = false);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32, Device device = Device::cpu());
  // Copies `values` (converted to `dtype`, rounding to nearest even for 16-bit floats) into a new tensor.
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::F32,
                            Device device = Device::cpu());
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32,
                            Device device = Device::cpu());
  static Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::I64,
                            Device device = Device::cpu());
  // Views an existing storage (no copy).
  static Tensor from_storage(std::shared_ptr<Storage> storage, size_t offset_bytes, const Shape& shape, DType dtype);

  // --- metadata ------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  size_t offset_bytes() const;
  const std::shared_ptr<Storage>& storage() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  const std::string& name() const;
  Tensor& set_name(std::string name);
  std::string str() const;  // "f32[2, 3] cuda:0"

  void* data_ptr() const;
  template <class T>
  T* data() const;  // checks that T matches dtype(); 16-bit floats are uint16_t

  // --- views (share storage) -----------------------------------------------
  Tensor reshape(const Shape& shape) const;  // same numel; -1 infers one extent
  Tensor narrow(int64_t start, int64_t length) const;  // rows [start, start+length) of dim 0
  // Elements [offset, offset + numel(shape)) of this tensor's storage region, viewed with `shape`.
  Tensor view_range(int64_t offset_elems, const Shape& shape) const;
  // Same storage and shape, no autograd history; shares the version counter.
  Tensor detach() const;

  // --- copies and conversion -----------------------------------------------
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  Tensor clone() const;
  // Copies src into this tensor (same numel; any devices and dtypes); on CUDA
  // the copy is queued on the current stream.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  // Replaces this tensor's storage, shape and dtype with src's (sharing src's
  // storage) while keeping its identity: autograd flags, grad, hooks, name.
  // How a module moves its parameters to a device (PyTorch's `param.data = x`).
  // Leaves only.
  void set_data(const Tensor& src);
  Tensor& zero_() { return fill_(0.0); }

  // Values as doubles on the host (synchronises with the device); for tests and logging.
  std::vector<double> to_double_vector() const;
  std::vector<int64_t> to_int_vector() const;
  double item() const;  // numel() must be 1

  // --- autograd ------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad);  // leaves only
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor grad() const;  // undefined until the first backward reaches this leaf
  void set_grad(const Tensor& grad);  // may be undefined (to free it) or a view into a bucket
  // Runs backward from this tensor. With no `gradient`, the tensor must hold one element and 1 is used.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // `hook(param)` runs once per backward, after param.grad() holds this backward's complete
  // contribution. Returns a handle for remove_post_accumulate_grad_hook.
  uint64_t register_post_accumulate_grad_hook(PostAccumulateGradHook hook);
  void remove_post_accumulate_grad_hook(uint64_t handle);

  void bump_version() const { storage()->bump_version(); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace tandem
