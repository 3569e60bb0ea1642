// Clip by global norm, fused and deterministic, with no host synchronisation.
//
// Pass 1 (multi-tensor): each chunk of kChunk elements is summed as squares in
// f32 by one block (a fixed thread-to-element map and shuffle tree) into its
// own slot of a partials array indexed by the chunk's global number. Pass 2
// (one block): the partials are summed in a fixed order, norm = sqrt(sum),
// coef = min(1, max_norm / (norm + 1e-6)); both stay on the device. Pass 3
// (multi-tensor): every gradient is multiplied by coef (read on the device).
// The order of additions depends only on the tensor sizes and alignment, so
// the same gradients give the same bits on every run. Traffic: the gradients
// are read twice and written once (12 bytes per parameter) plus 4 bytes per
// chunk of partials. Numerics: f32 accumulation over chunks of 4096 squares,
// then over the chunk sums; relative error ~1e-6 for 1e8 elements against the
// f64 CPU reference.
#include "core/allocator.h"
#include "optim/cuda/clip_cuda.h"
#include "optim/cuda/multi_tensor.cuh"
#include "optim/update_math.h"

namespace tandem::optim {

namespace {

struct SumSquaresOp {
  float* partials;

  __device__ bool skip() const { return false; }
  __device__ void prepare(const mt::Meta<1>&, int) {}
  template <bool Vec>
  __device__ void chunk(const mt::Meta<1>& m, int t, int64_t begin, int64_t end, int64_t global_chunk) const {
    float acc = 0.0f;
    mt::for_each_element<1, 0u, Vec>(m, t, begin, end, [&](float (&x)[1]) { acc += x[0] * x[0]; });
    acc = mt::block_sum(acc);
    if (threadIdx.x == 0) partials[global_chunk] = acc;
  }
};

struct ScaleOp {
  const float* coef;
  float c;

  __device__ bool skip() const { return false; }
  __device__ void prepare(const mt::Meta<1>&, int) { c = *coef; }
  template <bool Vec>
  __device__ void chunk(const mt::Meta<1>& m, int t, int64_t begin, int64_t end, int64_t) const {
    const float k = c;
    mt::for_each_element<1, 1u, Vec>(m, t, begin, end, [&](float (&x)[1]) { x[0] *= k; });
  }
};

__global__ void __launch_bounds__(mt::kThreads) finish_norm_kernel(const float* partials, int64_t count,
                                                                   double max_norm, float* total_norm, float* coef) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += mt::kThreads) s += partials[i];
  s = mt::block_sum(s);
  if (threadIdx.x == 0) {
    const float norm = sqrtf(s);
    *total_norm = norm;
    *coef = clip_coefficient(norm, max_norm);
  }
}

}  // namespace

void clip_grad_norm_cuda(const TensorList& grads, double max_norm, float* total_norm, int device, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t chunks = mt::total_chunks(grads);
  // partials[0, chunks) then the coefficient.
  const size_t bytes = sizeof(float) * static_cast<size_t>(chunks + 1);
  auto* scratch = static_cast<float*>(cuda_memory::allocate(device, bytes, stream));
  float* coef = scratch + chunks;
  mt::apply<1>(grads, SumSquaresOp{scratch}, s);
  finish_norm_kernel<<<1, mt::kThreads, 0, s>>>(scratch, chunks, max_norm, total_norm, coef);
  TANDEM_CUDA_CHECK_LAUNCH();
  mt::apply<1>(grads, ScaleOp{coef, 1.0f}, s);
  cuda_memory::deallocate(device, scratch, bytes, stream);
}

}  // namespace tandem::optim
