// How many row slots a deterministic column sum over [rows, dim] data uses
// (kernels/cuda/column_sum.cuh: bias and layer-norm parameter gradients).
//
// Slot s sums rows s, s + slots, ... of every column (pass 1, inside the op's
// own kernel: by default one thread per slot and 16-byte column vector, in
// order; kernels/cuda/column_sum_kernels.cuh's block walk and layer norm's lanes
// kernel spread a slot over a block's thread rows instead); pass 2 adds the
// slots' f32 partials in order. So the slot count is pass 1's parallelism in
// the thread walk and pass 2's extra traffic (slots x dim x 4 bytes, written
// and read once), and with the walk it fixes the order of every addition: it
// depends only on the shape (rows, dim), never on the GPU or the run.
//
// The rule: one slot per 32 rows, at most kColumnSumMaxSlots (1024) slots and
// 16 MiB of partials.
//
// Measured (docs/results/gpu.md, second run): a rule of 8 to 32 rows per slot
// aiming at 2M slot elements (2048 slots at 16384 x 768) made every op that
// uses it slower on the H200, not faster: the layer-norm backward 66 -> 77 us
// in bf16 and 70 -> 92 us in f32, bias_dropout_add's backward 31 -> 37 and
// 42 -> 49 us. The likely reason is pass 2 (column_sum.cuh's finish kernel):
// it has one block per 32 columns (24 blocks at dim 768 on 132 SMs) and each
// thread adds slots / 16 partials one after the other, so more slots lengthen a
// pass that has too few threads. More slots only pay once pass 2 is parallel
// across slots too.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::kernels {

inline constexpr int64_t kColumnSumRowsPerSlot = 32;
inline constexpr int64_t kColumnSumMaxSlots = 1024;
inline constexpr int64_t kColumnSumMaxPartialElements = int64_t{1} << 22;  // 16 MiB of f32

inline int64_t column_sum_slots(int64_t rows, int64_t dim) {
  const int64_t wanted = (rows + kColumnSumRowsPerSlot - 1) / kColumnSumRowsPerSlot;
  const int64_t capped = std::min({wanted, kColumnSumMaxSlots, kColumnSumMaxPartialElements / std::max<int64_t>(dim, 1)});
  return std::max<int64_t>(capped, 1);
}

}  // namespace tandem::kernels
