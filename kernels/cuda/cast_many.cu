// cast_many: many f32 tensors converted to one 16-bit dtype in one launch
// (TANDEM_PARAMETER_CASTS=batched, kernels/parameter_casts.h: a forward's
// parameter casts).
//
// Work (kernels/cuda/cast_many_plan.h, which the CPU tests run too): each
// block converts kBlockElems consecutive elements of one tensor;
// the launch's blocks run over the tensors in list order, and a block finds its
// tensor by a binary search of the tensors' first blocks (at most 7 steps over
// the kernel-parameter block). Memory traffic: 4 + 2 bytes an element, bound by
// bandwidth as core/cuda/copy_kernels.cu's convert; what the batching saves is
// the launches (one per tensor), not bytes. A thread moves 8 elements: two
// 16-byte loads and one 16-byte store when both its tensor's pointers are
// 16-byte aligned and the 8 are whole, else one element at a time (a tensor's
// last partial step, or a view at an odd offset: only that tensor pays).
//
// Numerics: from_float, the bit-exact round to nearest even the host and
// copy_kernels.cu use (core/element.h), so each output equals cast(x, dtype)'s.
#include "core/cuda_check.h"
#include "kernels/cuda/cast_many_plan.h"
#include "kernels/cuda/elementwise_cuda.h"

namespace tandem::kernels {

namespace {

using namespace cast_many_plan;

template <class D>
__global__ void __launch_bounds__(kThreads) cast_many_kernel(const __grid_constant__ CastList list) {
  convert_thread<D>(list, static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x));
}

template <class D>
void launch(const CastList& list, cudaStream_t stream) {
  cast_many_kernel<D><<<list.first_block[list.count], kThreads, 0, stream>>>(list);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cast_many_cuda(const std::vector<cast_many_plan::Entry>& entries, DType dst_type, void* stream) {
  TANDEM_CHECK(dst_type == DType::BF16 || dst_type == DType::F16, "cast_many_cuda: f32 to bf16 or f16 only, not {}",
               dtype_name(dst_type));
  auto s = static_cast<cudaStream_t>(stream);
  plan_launches(entries, [&](const CastList& list) {
    if (dst_type == DType::BF16) launch<BFloat16>(list, s);
    else launch<Half>(list, s);
  });
}

}  // namespace tandem::kernels
