// How a TensorList is cut into multi-tensor launches (optim/cuda/multi_tensor.cuh),
// as host code that needs no GPU: the launch's parameter block (Meta) and the
// packing of tensors into as few launches as it allows.
//
// Each tensor is cut into chunks of kChunk elements. One launch takes up to
// Meta<Depth>::kMaxTensors tensors: their operand pointers, sizes, step
// counters, the running chunk count and one bit per tensor saying whether
// all its operands are 16-byte aligned. The kernel moves an aligned tensor's
// elements as float4 and an unaligned one's as scalars, so one misaligned
// gradient (a view into a DDP bucket) costs only its own vectorisation, not
// the launch's.
#pragma once

#include <cstdint>

#include "core/half.h"  // TANDEM_HD
#include "optim/tensor_list.h"

namespace tandem::optim::mt {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 4096;  // 4 float4 per thread per chunk
static_assert(kChunk % (4 * kThreads) == 0, "a chunk is whole float4 rows of the block");

template <int Depth>
struct Meta {
  static constexpr int kMaxTensors = 3584 / (8 * (Depth + 3));
  float* ptr[Depth][kMaxTensors];
  float* step[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t chunk_start[kMaxTensors + 1];  // first chunk of each tensor in this launch; [count] = all chunks
  uint32_t unaligned[(kMaxTensors + 31) / 32];  // bit t: some operand of tensor t is not 16-byte aligned
  int count;

  TANDEM_HD bool vectorised(int t) const { return ((unaligned[t / 32] >> (t % 32)) & 1u) == 0; }
};
static_assert(sizeof(Meta<1>) <= 3700 && sizeof(Meta<4>) <= 3700, "leave room for the op in the 4 KiB of parameters");

inline int64_t chunks_of(int64_t numel) { return (numel + kChunk - 1) / kChunk; }

// Chunks in the whole list: the global chunk index passed to Op::chunk runs over [0, total_chunks).
inline int64_t total_chunks(const TensorList& list) {
  int64_t n = 0;
  for (const TensorListEntry& e : list) n += chunks_of(e.numel);
  return n;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Calls launch(meta, chunk_base) for each launch that covers `list` (operands
// 0..Depth-1, empty tensors skipped), in list order; chunk_base is the global
// index of the launch's first chunk.
template <int Depth, class Launch>
void plan_launches(const TensorList& list, Launch&& launch) {
  Meta<Depth> meta{};
  int64_t chunks = 0, chunk_base = 0;
  auto flush = [&] {
    if (meta.count == 0) return;
    meta.chunk_start[meta.count] = chunks;
    launch(static_cast<const Meta<Depth>&>(meta), chunk_base);
    chunk_base += chunks;
    chunks = 0;
    meta = Meta<Depth>{};
  };
  for (const TensorListEntry& e : list) {
    if (e.numel == 0) continue;
    const int t = meta.count++;
    bool aligned = true;
    for (int d = 0; d < Depth; ++d) {
      meta.ptr[d][t] = e.ptr[d];
      aligned = aligned && aligned16(e.ptr[d]);
    }
    if (!aligned) meta.unaligned[t / 32] |= 1u << (t % 32);
    meta.step[t] = e.step;
    meta.numel[t] = e.numel;
    meta.chunk_start[t] = chunks;
    chunks += chunks_of(e.numel);
    if (meta.count == Meta<Depth>::kMaxTensors) flush();
  }
  flush();
}

}  // namespace tandem::optim::mt
