// The CUDA attention kernels' launches as kernels/cuda/attention.cu makes them
// (the same grids, shared memory and operands), run on the CPU by
// tests/testing/warp_emulator.h: the forward (tiled, pipelined or pipelined wide), the
// split backward (rowdot, then dK/dV and dQ, plain or pipelined) and the fused one (plain,
// ordered, ordered pipelined), each visiting every key tile or the trimmed ones. For the emulated tests, which include
// this header first: it brings in the emulator before the device code, and
// counts the dropout's Philox blocks (attention_kernels.cuh's hook) in
// philox_blocks_computed, and can record the saved keep bytes read in keep_bytes_read.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

// Counts the Philox blocks the device code computes for dropout.
inline int64_t philox_blocks_computed = 0;
#define ATTENTION_COUNT_PHILOX() (++::philox_blocks_computed)
// Where set, records the index of every saved keep byte the device code reads (Params::keep_in).
inline std::vector<uint64_t>* keep_bytes_read = nullptr;
#define ATTENTION_ON_KEEP_READ(block) (::keep_bytes_read != nullptr ? ::keep_bytes_read->push_back(block) : void())

#include "core/tensor.h"
#include "kernels/cuda/attention_backward_fused.cuh"
#include "kernels/cuda/attention_backward_pipelined.cuh"
#include "kernels/cuda/attention_forward_pipelined.cuh"
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/attention_switches.h"
#include "tests/kernels/attention_testing.h"

namespace tandem::kernels::attention_detail {

// attention.cu's KeyEnds: with Trimmed and a mask, key_end_kernel's launch (one warp per batch row) and
// params.key_end pointing at its output, which the returned vector owns; otherwise nothing.
inline std::vector<int> emulated_key_ends(const Tensor& mask, const AttentionShape& s, AttentionKeyTiles tiles,
                                          Params& params) {
  if (!mask.defined() || tiles != AttentionKeyTiles::Trimmed) return {};
  std::vector<int> key_end(static_cast<size_t>(s.batch), -1);
  warp_emulator::launch(static_cast<unsigned>((s.batch + kWarps - 1) / kWarps), 1, kThreads, 0, [&] {
    key_end_kernel(mask.data<uint8_t>(), static_cast<int>(s.batch), static_cast<int>(s.seq), key_end.data());
  });
  params.key_end = key_end.data();  // a vector's buffer stays where it is when the vector is moved
  return key_end;
}

// attention_forward_cuda's launch of `which` (f32 always runs the tiled kernel; the pipelined ones as
// attention_occupancy() says, which the tests force), with the warps
// interleaved by `schedule`, visiting the key tiles `tiles` says, saving the dropout keep bits to `keep_out`
// where given (trimmed, after attention.cu's zeroing of them; without `zero_keep`, the kernels' bytes
// alone). out and lse start as NaN, so every element must be written.
template <class T>
void emulated_forward(const Tensor& qkv, const Tensor& mask, Tensor& out, Tensor& lse, const AttentionShape& s,
                      const AttentionDropout& d, AttentionForwardKernel which = AttentionForwardKernel::Tiled,
                      warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin,
                      AttentionKeyTiles tiles = AttentionKeyTiles::All, uint8_t* keep_out = nullptr,
                      bool zero_keep = true) {
  using testing::mask_ptr;
  out.fill_(std::nan(""));
  lse.fill_(std::nan(""));
  Params params = make_params(s, d);
  if (d.active()) params.keep_out = keep_out;
  const std::vector<int> key_ends = emulated_key_ends(mask, s, tiles, params);
  if (zero_keep && params.keep_out != nullptr && params.key_end != nullptr)  // attention.cu's memset
    std::fill_n(params.keep_out, attention_keep_bytes(s), uint8_t{0});
  params.tiles_first = tiles_first_applies(s, attention_block_order());  // attention.cu's forward launch
  const Grid grid = block_grid(params, s.batch * s.heads, row_tiles(s));
  const bool vec = vector_loads<T>(qkv.data_ptr(), s.head_dim);
  with_padded_dim(s.head_dim, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    const auto* q = static_cast<const T*>(qkv.data_ptr());
    auto* o = static_cast<T*>(out.data_ptr());
    if constexpr (sizeof(T) == 2) {
      if (which != AttentionForwardKernel::Tiled)
        return with_pipelined_forward<T, DP>(
            which == AttentionForwardKernel::PipelinedWide, attention_occupancy() == AttentionOccupancy::High, s.seq,
            [&](auto kernel, size_t smem, unsigned blocks) {
              const Grid pipelined = block_grid(params, s.batch * s.heads, blocks);
              warp_emulator::launch(
                  pipelined.x, pipelined.y, kThreads, smem,
                  [&] { kernel(q, mask_ptr(mask), o, lse.data<float>(), params, vec); }, schedule);
            });
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
// `pipelined` (16 bits), the passes are dkdv_pipelined_kernel and dq_pipelined_kernel, compiled as
// attention_occupancy() says. The dK/dV and
// dQ passes' warps are interleaved by `schedule`; `tiles` as for the forward; the keep bits read from
// `keep_in` where given.
template <class T>
void emulated_split_backward(const Tensor& qkv, const Tensor& mask, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, Tensor& dqkv, const AttentionShape& s, const AttentionDropout& d,
                             bool pipelined = false,
                             warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin,
                             AttentionKeyTiles tiles = AttentionKeyTiles::All, const uint8_t* keep_in = nullptr) {
  using testing::mask_ptr;
  Params params = make_params(s, d);
  if (d.active()) params.keep_in = keep_in;
  const std::vector<int> key_ends = emulated_key_ends(mask, s, tiles, params);
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
    with_split_passes<T, DP>(pipelined, attention_occupancy() == AttentionOccupancy::High, launch);
  });
}

// The fused path's launches (attention.cu's backward_fused) with the plan for `scratch_limit`, run by the
// emulator: per chunk of heads the fused kernel and the dQ reduction, or with `ordered` the turn flags set
// to `first_turn` (0, as attention.cu's memset; another value checks that the blocks wait) and the ordered
// kernel on the grid key tiles x heads. The scratch (partials, or the ordered accumulators) starts as NaN,
// so a partial that no block writes, or an accumulator that key tile 0 does not write first, shows up in dQ.
// `pipelined` (16 bits, with `ordered`) runs the double-buffered ordered kernel under `schedule`; `tiles`
// picks the key tiles the kernels visit; the keep bits are read from `keep_in` where given; the chunks are
// sized to whole rounds of `resident_blocks` where that is not 0 (TANDEM_ATTENTION_FUSED_CHUNKS=waves).
template <class T>
void emulated_fused(const testing::AttentionProblem& p, Tensor& dqkv, size_t scratch_limit, bool ordered = false, int first_turn = 0,
                    bool pipelined = false, warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin,
                    AttentionKeyTiles tiles = AttentionKeyTiles::All, const uint8_t* keep_in = nullptr,
                    int64_t resident_blocks = 0) {
  Params params = make_params(p.s, p.d);
  if (p.d.active()) params.keep_in = keep_in;
  const std::vector<int> key_ends = emulated_key_ends(p.mask, p.s, tiles, params);
  const FusedBackwardPlan plan = plan_fused_backward(p.s, scratch_limit, ordered, resident_blocks);
  ASSERT_GT(plan.heads_per_launch, 0) << "the plan falls back to the split path";
  const std::vector<float> rowdot = emulated_rowdot<T>(p.out, p.dout, params, p.s);
  const int64_t per_launch = plan.heads_per_launch;
  std::vector<float> scratch(ordered ? per_launch * p.s.seq * p.s.head_dim : plan.scratch_bytes / sizeof(float),
                             std::nanf(""));
  std::vector<int> turns(ordered ? per_launch * fused_turns_per_head(p.s.seq) : 0);
  ASSERT_EQ(scratch.size() * sizeof(float) + turns.size() * sizeof(int), plan.scratch_bytes);
  const bool vec_qkv = vector_loads<T>(p.qkv.data_ptr(), p.s.head_dim);
  const bool vec_dout = vector_loads<T>(p.dout.data_ptr(), p.s.head_dim);
  const int64_t heads = p.s.batch * p.s.heads;
  with_padded_dim(p.s.head_dim, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    constexpr int BQ = kFusedQueryTile<T, DP>;
    for (int64_t bh0 = 0; bh0 < heads; bh0 += per_launch) {
      const int64_t n = std::min(per_launch, heads - bh0);
      const auto key_tiles = static_cast<unsigned>(row_tiles(p.s));
      if (ordered) {
        std::fill(turns.begin(), turns.end(), first_turn);
        const auto run = [&](auto kernel, size_t smem) {
          warp_emulator::launch(key_tiles, static_cast<unsigned>(n), kThreads, smem, [&] {
            kernel(p.qkv.data<T>(), testing::mask_ptr(p.mask), p.lse.data<float>(), rowdot.data(), p.dout.data<T>(),
                   dqkv.data<T>(), scratch.data(), turns.data(), static_cast<int>(bh0), params, vec_qkv, vec_dout);
          }, schedule);
        };
        with_ordered_fused_kernel<T, DP>(pipelined, run);
        continue;
      }
      warp_emulator::launch(static_cast<unsigned>(n), key_tiles, kThreads, fused_backward_smem_bytes<T, DP>(), [&] {
        fused_backward_kernel<T, DP, BQ>(p.qkv.data<T>(), testing::mask_ptr(p.mask), p.lse.data<float>(), rowdot.data(),
                                         p.dout.data<T>(), dqkv.data<T>(), scratch.data(), nullptr,
                                         static_cast<int>(bh0), params, vec_qkv, vec_dout);
      });
      const int count = static_cast<int>(n * p.s.seq * p.s.head_dim);
      warp_emulator::launch(static_cast<unsigned>((count + kThreads - 1) / kThreads), 1, kThreads, 0, [&] {
        dq_reduce_kernel<T>(scratch.data(), dqkv.data<T>(), static_cast<int>(bh0), count, params);
      });
    }
  });
}

// A backward path's launches; SplitPipelined and FusedOrderedPipelined are 16-bit only.
enum class Path { Split, SplitPipelined, Fused, FusedOrdered, FusedOrderedPipelined };

// An emulated suite over (dtype, case) that runs, for its dtype, every forward kernel and backward path in
// 16 bits, and in f32 the tiled forward and the paths without cp.async (the others stand for those there).
class EmulatedAttentionVariants : public ::testing::TestWithParam<std::tuple<DType, testing::AttentionCase>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  const testing::AttentionCase& attention_case() const { return std::get<1>(GetParam()); }
  std::vector<AttentionForwardKernel> forward_kernels() const {
    if (dtype() == DType::F32) return {AttentionForwardKernel::Tiled};
    return {AttentionForwardKernel::Tiled, AttentionForwardKernel::Pipelined, AttentionForwardKernel::PipelinedWide};
  }
  std::vector<Path> backward_paths() const {
    if (dtype() == DType::F32) return {Path::Split, Path::Fused, Path::FusedOrdered};
    return {Path::Split, Path::SplitPipelined, Path::Fused, Path::FusedOrdered, Path::FusedOrderedPipelined};
  }
};

// dqkv from `path`'s launches on p (its CPU forward's out and lse), starting as NaN so that every element
// must be written; the dropout keep bits read from `keep_in` where given.
inline Tensor emulated_backward(const testing::AttentionProblem& p, Path path, size_t scratch_limit = kFusedScratchLimit,
                         warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin,
                         AttentionKeyTiles tiles = AttentionKeyTiles::All, const uint8_t* keep_in = nullptr) {
  Tensor dqkv = Tensor::empty(p.qkv.shape(), p.t);
  dqkv.fill_(std::nan(""));  // every element must be written
  TANDEM_DISPATCH_FLOAT_NO_F64(p.t, "emulated attention backward", [&] {
    if (path == Path::Split || path == Path::SplitPipelined)
      emulated_split_backward<scalar_t>(p.qkv, p.mask, p.out, p.lse, p.dout, dqkv, p.s, p.d,
                                        path == Path::SplitPipelined, schedule, tiles, keep_in);
    else emulated_fused<scalar_t>(p, dqkv, scratch_limit, path != Path::Fused, 0, path == Path::FusedOrderedPipelined,
                                  schedule, tiles, keep_in);
  });
  return dqkv;
}

}  // namespace tandem::kernels::attention_detail
