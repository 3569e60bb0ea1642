// Communication hooks: how a bucket of gradients is reduced across ranks
// (PyTorch's register_comm_hook). The Reducer hands a hook each bucket when it
// is full, with the gradients already divided by the world size, so every hook
// computes a sum. A hook starts its collective and returns a
// PendingReduction; `finish` runs after the collective completed (at the end of
// backward, on the comm stream for device buckets) and must leave the reduced
// gradients in the bucket buffer.
#pragma once

#include <functional>
#include <memory>

#include "comm/process_group.h"
#include "core/tensor.h"

namespace tandem::ddp {

struct GradBucket {
  int index = 0;
  Tensor buffer;  // flat gradients of the bucket's parameters, divided by the world size
};

struct PendingReduction {
  std::shared_ptr<comm::Work> work;
  std::function<void()> finish;  // may be empty
};

using CommHook = std::function<PendingReduction(comm::ProcessGroup& group, GradBucket& bucket)>;

// Sums the bucket in place: the default.
CommHook allreduce_hook();
// Casts the bucket to f16 (or bf16), sums that, and casts back: half the bytes on
// the wire, at the cost of 16-bit rounding of each rank's contribution and of
// the sum (as PyTorch's fp16_compress_hook / bf16_compress_hook).
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

}  // namespace tandem::ddp
