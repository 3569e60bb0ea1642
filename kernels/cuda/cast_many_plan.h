// cast_many's launches as code that needs no GPU (kernels/cuda/cast_many.cu runs it):
// the kernel's parameter block (CastList), the packing of a list of tensors into as
// few launches as that block allows, and what one thread of a launch does. The CPU
// tests run every thread of every planned launch here and compare with cast
// (tests/nn/parameter_casts_test.cc), so the indexing, the binary search and the
// vector and element paths are checked without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/element.h"  // from_float, TANDEM_HD

namespace tandem::kernels::cast_many_plan {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int64_t kBlockElems = static_cast<int64_t>(kThreads) * kPerThread;
// 96 tensors: 2.7 KiB of the 4 KiB kernel-parameter block; longer lists take more launches.
constexpr int kMaxTensors = 96;
constexpr int64_t kMaxBlocks = 0x7fffffff;  // the grid's x extent

// One f32 tensor of a cast_many call: `numel` elements at src, converted into dst.
struct Entry {
  const float* src;
  void* dst;
  int64_t numel;
};

struct CastList {
  const float* src[kMaxTensors];
  void* dst[kMaxTensors];
  int64_t numel[kMaxTensors];
  int first_block[kMaxTensors + 1];  // [count]: the launch's blocks
  int count;
};
static_assert(sizeof(CastList) <= 3000, "the kernel-parameter block is 4 KiB");

// Calls launch(list) for each launch that covers `entries` in order (empty tensors skipped).
template <class Launch>
void plan_launches(const std::vector<Entry>& entries, Launch&& launch) {
  CastList list{};
  auto flush = [&] {
    if (list.count > 0) launch(static_cast<const CastList&>(list));
    list = CastList{};
  };
  for (const Entry& e : entries) {
    if (e.numel == 0) continue;
    const int64_t blocks = (e.numel + kBlockElems - 1) / kBlockElems;
    TANDEM_CHECK(blocks <= kMaxBlocks, "cast_many: a tensor of {} elements is more than one launch", e.numel);
    if (list.count == kMaxTensors || list.first_block[list.count] + blocks > kMaxBlocks) flush();
    list.src[list.count] = e.src;
    list.dst[list.count] = e.dst;
    list.numel[list.count] = e.numel;
    list.first_block[list.count + 1] = list.first_block[list.count] + static_cast<int>(blocks);
    ++list.count;
  }
  flush();
}

template <class T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};

TANDEM_HD inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Thread `thread` of block `block`: kPerThread elements of the tensor whose blocks hold `block`.
template <class D>
TANDEM_HD inline void convert_thread(const CastList& list, int block, int thread) {
  static_assert(sizeof(D) * kPerThread == 16, "a thread's 8 outputs are one 16-byte store: 16-bit D only");
  int lo = 0, hi = list.count - 1;  // the last tensor whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (list.first_block[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  const float* src = list.src[lo];
  D* dst = static_cast<D*>(list.dst[lo]);
  const int64_t n = list.numel[lo];
  const int64_t i = static_cast<int64_t>(block - list.first_block[lo]) * kBlockElems +
                    static_cast<int64_t>(thread) * kPerThread;
  if (i >= n) return;
  if (i + kPerThread <= n && aligned16(src) && aligned16(dst)) {
    // Two 16-byte loads, one 16-byte store.
    const Pack<float> a = reinterpret_cast<const Pack<float>*>(src + i)[0];
    const Pack<float> c = reinterpret_cast<const Pack<float>*>(src + i)[1];
    Pack<D> out;
    for (int k = 0; k < 4; ++k) {
      out.v[k] = from_float<D>(a.v[k]);
      out.v[4 + k] = from_float<D>(c.v[k]);
    }
    *reinterpret_cast<Pack<D>*>(dst + i) = out;
    return;
  }
  const int64_t end = i + kPerThread < n ? i + kPerThread : n;
  for (int64_t k = i; k < end; ++k) dst[k] = from_float<D>(src[k]);
}

}  // namespace tandem::kernels::cast_many_plan
