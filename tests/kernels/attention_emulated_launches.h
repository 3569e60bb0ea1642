// The CUDA attention kernels' launches as kernels/cuda/attention.cu makes them
// (the same grids, shared memory and operands), run on the CPU by
// tests/testing/warp_emulator.h: the forward (tiled, pipelined or pipelined wide) and the
// split backward (rowdot, then dK/dV and dQ, plain or pipelined). For the emulated tests, which include
// this header first: it brings in the emulator before the device code, and
// counts the dropout's Philox blocks (attention_kernels.cuh's hook) in
// philox_blocks_computed.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

// Counts the Philox blocks the device code computes for dropout.
inline int64_t philox_blocks_computed = 0;
#define ATTENTION_COUNT_PHILOX() (++::philox_blocks_computed)

#include "core/tensor.h"
#include "kernels/cuda/attention_backward_pipelined.cuh"
#include "kernels/cuda/attention_forward_pipelined.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_switches.h"
#include "tests/kernels/attention_testing.h"

namespace tandem::kernels::attention_detail {

// attention_forward_cuda's launch of `which` (f32 always runs the tiled kernel), with the warps
// interleaved by `schedule`. out and lse start as NaN, so every element must be written.
template <class T>
void emulated_forward(const Tensor& qkv, const Tensor& mask, Tensor& out, Tensor& lse, const AttentionShape& s,
                      const AttentionDropout& d, AttentionForwardKernel which = AttentionForwardKernel::Tiled,
                      warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
  using testing::mask_ptr;
  out.fill_(std::nan(""));
  lse.fill_(std::nan(""));
  const Params params = make_params(s, d);
  const Grid grid = grid_for(s);
  const bool vec = vector_loads<T>(qkv.data_ptr(), s.head_dim);
  with_padded_dim(s.head_dim, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    const auto* q = static_cast<const T*>(qkv.data_ptr());
    auto* o = static_cast<T*>(out.data_ptr());
    if constexpr (sizeof(T) == 2) {
      const auto pipelined = [&](auto mt) {
        constexpr int MT = decltype(mt)::value;
        warp_emulator::launch(
            grid.x, pipelined_query_blocks(s.seq, MT), kThreads, forward_pipelined_smem_bytes<T, DP, MT>(),
            [&] { forward_pipelined_kernel<T, DP, MT>(q, mask_ptr(mask), o, lse.data<float>(), params, vec); },
            schedule);
      };
      if (which != AttentionForwardKernel::Tiled)
        return with_row_tiles<DP>(which == AttentionForwardKernel::PipelinedWide, pipelined);
    }
    warp_emulator::launch(
        grid.x, grid.y, kThreads, forward_smem_bytes<T, DP>(),
        [&] { forward_kernel<T, DP>(q, mask_ptr(mask), o, lse.data<float>(), params, vec); }, schedule);
  });
}

// D = rowsum(dO * O), the first launch of both backward paths.
template <class T>
std::vector<float> emulated_rowdot(const Tensor& out, const Tensor& dout, const Params& params, const AttentionShape& s) {
  const int64_t rows = s.batch * s.seq * s.heads;
  std::vector<float> rowdot(static_cast<size_t>(rows));
  warp_emulator::launch(static_cast<unsigned>((rows + kWarps - 1) / kWarps), 1, kThreads, 0, [&] {
    rowdot_kernel<T>(static_cast<const T*>(dout.data_ptr()), static_cast<const T*>(out.data_ptr()), rowdot.data(),
                     rows, params.seq, params.heads, params.dh);
  });
  return rowdot;
}

// The split backward's launches (attention.cu's backward_split): rowdot, dK/dV, dQ, into dqkv; with
// `pipelined` (16 bits), the passes are dkdv_pipelined_kernel and dq_pipelined_kernel. The dK/dV and
// dQ passes' warps are interleaved by `schedule`.
template <class T>
void emulated_split_backward(const Tensor& qkv, const Tensor& mask, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, Tensor& dqkv, const AttentionShape& s, const AttentionDropout& d,
                             bool pipelined = false,
                             warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
  using testing::mask_ptr;
  const Params params = make_params(s, d);
  const Grid grid = grid_for(s);
  const std::vector<float> rowdot = emulated_rowdot<T>(out, dout, params, s);
  const bool vec_qkv = vector_loads<T>(qkv.data_ptr(), s.head_dim);
  const bool vec_dout = vector_loads<T>(dout.data_ptr(), s.head_dim);
  const auto* q = static_cast<const T*>(qkv.data_ptr());
  const auto* go = static_cast<const T*>(dout.data_ptr());
  auto* dq = static_cast<T*>(dqkv.data_ptr());
  with_padded_dim(s.head_dim, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    // Each pass's kernel with its shared memory, on attention.cu's grid.
    const auto launch = [&](auto kernel, size_t smem) {
      warp_emulator::launch(
          grid.x, grid.y, kThreads, smem,
          [&] { kernel(q, mask_ptr(mask), lse.data<float>(), rowdot.data(), go, dq, params, vec_qkv, vec_dout); },
          schedule);
    };
    with_split_passes<T, DP>(pipelined, launch);
  });
}

}  // namespace tandem::kernels::attention_detail
