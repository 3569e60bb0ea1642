#include "ddp/comm_hook.h"

#include "core/check.h"
#include "kernels/cpu/elementwise_cpu.h"

#if TANDEM_WITH_CUDA
#include "core/stream.h"
#include "kernels/cuda/elementwise_cuda.h"
#endif

namespace tandem::ddp {

std::vector<Tensor> GradBucket::gradients() const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < parameters.size(); ++k) out.push_back(buffer.view_range(offsets[k], parameters[k].shape()));
  return out;
}

void scale_into(const Tensor& src, const Tensor& dst, double alpha) {
  TANDEM_CHECK(src.dtype() == dst.dtype() && src.device() == dst.device() && src.numel() == dst.numel(),
               "scale_into: {} and {} differ in dtype, device or size", src.str(), dst.str());
  if (dst.device().is_cpu()) {
    kernels::scale_cpu(src.data_ptr(), dst.data_ptr(), dst.dtype(), dst.numel(), alpha);
  } else {
#if TANDEM_WITH_CUDA
    kernels::scale_cuda(src.data_ptr(), dst.data_ptr(), dst.dtype(), dst.numel(), alpha,
                        cuda::current_stream(dst.device().index).handle());
#endif
  }
  dst.bump_version();
}

void scale_in_place(const Tensor& t, double alpha) { scale_into(t, t, alpha); }

CommHook allreduce_hook() {
  return [](void*, comm::ProcessGroup& group, GradBucket& bucket) {
    // Divide before the sum, as PyTorch does: the sum of averages cannot overflow
    // where the sum of gradients might.
    scale_in_place(bucket.buffer, 1.0 / group.size());
    return PendingReduction{group.all_reduce(bucket.buffer, comm::ReduceOp::Sum), {}};
  };
}

namespace {
CommHook compress_hook(DType wire) {
  return [wire](void*, comm::ProcessGroup& group, GradBucket& bucket) {
    Tensor compressed = bucket.buffer.to(wire);
    scale_in_place(compressed, 1.0 / group.size());
    auto work = group.all_reduce(compressed, comm::ReduceOp::Sum);
    Tensor target = bucket.buffer;
    return PendingReduction{work, [compressed, target]() mutable { target.copy_(compressed); }};
  };
}
}  // namespace

CommHook fp16_compress_hook() { return compress_hook(DType::F16); }
CommHook bf16_compress_hook() { return compress_hook(DType::BF16); }

}  // namespace tandem::ddp
