// TensorList: how the optimizers hand many tensors to one fused update (a
// CPU loop, or a few CUDA multi-tensor launches) without Tensor objects: per
// tensor, up to four f32 operand pointers of `numel` elements each and an
// optional f32 step counter. The meaning of each operand slot is fixed per op
// (AdamW: param, grad, exp_avg, exp_avg_sq; SGD: param, grad, momentum_buffer;
// unscale and clipping: grad) and written next to each raw entry point.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tandem::optim {

struct TensorListEntry {
  std::array<float*, 4> ptr{};  // operands, each numel f32 elements (unused slots null)
  float* step = nullptr;        // per-tensor step count (optimizers only)
  int64_t numel = 0;
};

using TensorList = std::vector<TensorListEntry>;

}  // namespace tandem::optim
