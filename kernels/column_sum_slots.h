// How many row slots a deterministic column sum over [rows, dim] data uses
// (kernels/cuda/column_sum.cuh: bias and layer-norm parameter gradients).
//
// Slot s sums rows s, s + slots, ... of every column in order (pass 1, inside
// the op's own kernel, which runs one thread per slot and 16-byte column
// vector); pass 2 adds the slots' f32 partials in order. So the slot count is
// pass 1's parallelism and pass 2's extra traffic (slots x dim x 4 bytes,
// written and read once), and it fixes the order of every addition: it depends
// only on the shape (rows, dim), never on the vector width, the GPU or the run,
// so the bits of a column sum depend only on the shape.
//
// The rule: aim for slots x dim = kColumnSumTargetElements (about one wave of
// full occupancy on an H100/H200 in 16-bit vectors, two in f32), within 8 to
// 32 rows per slot (fewer than 8 and the partials cost over a quarter of a
// 16-bit pass's traffic; more than 32 and a narrow row leaves the GPU idle),
// at most kColumnSumMaxSlots slots and 16 MiB of partials.
//
// Why not the earlier rows / 32 (at most 1024): the first GPU run measured the
// 16-bit kernels that use it at 27-56 % of the copy bandwidth against 51-89 %
// in f32, the signature of too few threads in flight. At 16384 rows of 768 it
// gave 512 slots, 49k threads (370 per SM) in 16 bits; at the training shape
// of configs/ag_news_optimized.yaml (32768 rows of 256) 1024 slots, 33k threads.
// This rule gives 2048 and 4096 slots there. Not yet timed on a GPU.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::kernels {

inline constexpr int64_t kColumnSumTargetElements = int64_t{1} << 21;
inline constexpr int64_t kColumnSumMaxPartialElements = int64_t{1} << 22;  // 16 MiB of f32
inline constexpr int64_t kColumnSumMaxSlots = 8192;
inline constexpr int64_t kColumnSumMinRowsPerSlot = 8;
inline constexpr int64_t kColumnSumMaxRowsPerSlot = 32;

inline int64_t column_sum_slots(int64_t rows, int64_t dim) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t d = std::max<int64_t>(dim, 1);
  const int64_t fewest = ceil_div(rows, kColumnSumMaxRowsPerSlot), most = ceil_div(rows, kColumnSumMinRowsPerSlot);
  const int64_t wanted = std::clamp(ceil_div(kColumnSumTargetElements, d), fewest, most);
  const int64_t capped = std::min({wanted, kColumnSumMaxSlots, kColumnSumMaxPartialElements / d});
  return std::max<int64_t>(capped, 1);
}

}  // namespace tandem::kernels
