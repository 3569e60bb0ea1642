// Multi-tensor apply: how every fused optimizer kernel walks many tensors in a
// few launches (the idea of PyTorch's multi_tensor_apply, with a grid-stride
// loop over chunks instead of a per-block table).
//
// optim/multi_tensor_plan.h cuts the list into launches: per launch, the
// operand pointers, sizes, step counters, chunk starts and alignment bits sit
// in the kernel's parameter block (under the 4 KiB every CUDA version
// accepts), so no metadata is copied to the device and a list of a few
// hundred tensors costs a handful of launches. The grid is one wave of
// resident blocks (from the occupancy calculator); block b takes chunks b,
// b + grid, ... in increasing order, so the tensor of a chunk is found by
// advancing an index, never by searching. The operation (Op) sees one chunk
// at a time: `prepare` runs when the block moves to a new tensor (AdamW
// computes its bias corrections there, in f64, once per tensor rather than
// per element) and `chunk` does the work. for_each_element loads each operand
// once and stores only the operands in WriteMask, so the bytes moved are
// exactly numel * 4 * (Depth + popcount(WriteMask)).
//
// Vectorisation is decided per tensor: where every operand of a tensor is
// 16-byte aligned (always true for tensors from our allocators; gradients that
// are views into a DDP bucket may not be), its elements move as float4; chunk
// boundaries are multiples of 4 so they stay aligned, and the last numel % 4
// elements take the scalar path. An unaligned tensor uses scalar accesses and
// leaves the others of its launch vectorised (the choice is uniform within a
// block, so it costs no divergence).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/cuda_check.h"
#include "optim/multi_tensor_plan.h"
#include "optim/tensor_list.h"

namespace tandem::optim::mt {

// Applies f(x) to the elements [begin, end) of tensor t, where x[d] is operand d;
// operands whose bit is set in WriteMask are stored back.
template <int Depth, unsigned WriteMask, bool Vec, class F>
__device__ __forceinline__ void for_each_element(const Meta<Depth>& m, int t, int64_t begin, int64_t end, F&& f) {
  int64_t scalar_begin = begin;
  if constexpr (Vec) {
    const int64_t vec_end = begin + (end - begin) / 4 * 4;
    for (int64_t i = begin + 4 * static_cast<int64_t>(threadIdx.x); i < vec_end; i += 4 * kThreads) {
      float v[Depth][4];
#pragma unroll
      for (int d = 0; d < Depth; ++d) {
        const float4 q = *reinterpret_cast<const float4*>(m.ptr[d][t] + i);
        v[d][0] = q.x, v[d][1] = q.y, v[d][2] = q.z, v[d][3] = q.w;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float x[Depth];
#pragma unroll
        for (int d = 0; d < Depth; ++d) x[d] = v[d][k];
        f(x);
#pragma unroll
        for (int d = 0; d < Depth; ++d) v[d][k] = x[d];
      }
#pragma unroll
      for (int d = 0; d < Depth; ++d)
        if (WriteMask >> d & 1u) *reinterpret_cast<float4*>(m.ptr[d][t] + i) = make_float4(v[d][0], v[d][1], v[d][2], v[d][3]);
    }
    scalar_begin = vec_end;
  }
  for (int64_t i = scalar_begin + threadIdx.x; i < end; i += kThreads) {
    float x[Depth];
#pragma unroll
    for (int d = 0; d < Depth; ++d) x[d] = m.ptr[d][t][i];
    f(x);
#pragma unroll
    for (int d = 0; d < Depth; ++d)
      if (WriteMask >> d & 1u) m.ptr[d][t][i] = x[d];
  }
}

// Op: a trivially copyable struct with
//   __device__ bool skip() const;                                  // true: the whole launch is a no-op
//   __device__ void prepare(const Meta<Depth>&, int t);            // the block moves to tensor t
//   template <bool Vec> __device__ void chunk(const Meta<Depth>&, int t, int64_t begin, int64_t end,
//                                             int64_t global_chunk);
template <int Depth, class Op>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(Meta<Depth> meta, Op op, int64_t chunk_base) {
  if (op.skip()) return;
  const int64_t total = meta.chunk_start[meta.count];
  int t = 0, prepared = -1;
  for (int64_t c = blockIdx.x; c < total; c += gridDim.x) {
    while (c >= meta.chunk_start[t + 1]) ++t;
    if (t != prepared) {
      op.prepare(meta, t);
      prepared = t;
    }
    const int64_t begin = (c - meta.chunk_start[t]) * kChunk;
    const int64_t end = begin + kChunk < meta.numel[t] ? begin + kChunk : meta.numel[t];
    if (meta.vectorised(t)) op.template chunk<true>(meta, t, begin, end, chunk_base + c);
    else op.template chunk<false>(meta, t, begin, end, chunk_base + c);
  }
}

// Blocks of this kernel that fit on the current device at once: the grid of a launch (one full wave).
template <int Depth, class Op>
int resident_blocks() {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&dev));
  int v = dev < 64 ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    int sms = 0, per_sm = 0;
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TANDEM_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, multi_tensor_kernel<Depth, Op>, kThreads, 0));
    v = sms * (per_sm > 0 ? per_sm : 1);
    if (dev < 64) cached[dev].store(v, std::memory_order_relaxed);
  }
  return v;
}

// Launches Op over every non-empty tensor of `list` (operands 0..Depth-1), in as few launches as the
// parameter block allows (plan_launches). Launches run in list order on `stream`.
template <int Depth, class Op>
void apply(const TensorList& list, const Op& op, cudaStream_t stream) {
  plan_launches<Depth>(list, [&](const Meta<Depth>& meta, int64_t chunk_base) {
    const int64_t grid = std::min<int64_t>(meta.chunk_start[meta.count], resident_blocks<Depth, Op>());
    multi_tensor_kernel<Depth><<<static_cast<int>(grid), kThreads, 0, stream>>>(meta, op, chunk_base);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

// Sum over the block (kThreads threads, all of which must call it); the result is valid in thread 0.
// A fixed shuffle tree, so the order of additions depends only on the block size.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // warp_sums may still be read by the previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace tandem::optim::mt
