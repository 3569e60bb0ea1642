// Communication hooks: how a bucket of gradients is reduced across ranks
// (PyTorch's register_comm_hook(state, hook)).
//
// The Reducer hands a hook each bucket when it is full, holding the sum of
// this rank's gradients, not yet divided by the world size: that is what
// PyTorch's Reducer hands a registered hook, so averaging is the hook's job
// and a hook ported from PyTorch (which divides once, e.g. allreduce_hook's
// `tensor.div_(world_size)`) computes the same average here instead of
// dividing twice. (Without a registered hook there is no such call: the
// Reducer divides each gradient as it copies it into the bucket, and
// all-reduces; allreduce_hook() computes the same average.) With the bucket come its position (index, is_last) and its
// parameters with their offsets in the buffer (PyTorch's GradBucket), and the
// `state` given with the hook (DDPOptions::comm_hook_state), which lives as
// long as DDP and is the same object on every call (error feedback, counters).
//
// A hook starts its collective and returns a PendingReduction; `finish` runs
// after the collective completed (at the end of backward, on the comm stream
// for device buckets) and must leave the averaged gradients in the bucket's
// buffer. Hooks run on the thread that runs backward, with the comm stream
// current for device buckets.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "core/tensor.h"

namespace tandem::ddp {

struct GradBucket {
  int index = 0;
  bool is_last = false;  // the last bucket launched in an iteration
  Tensor buffer;         // flat local gradients of the bucket's parameters (summed, not divided)
  std::vector<Tensor> parameters;  // in bucket order
  std::vector<int64_t> offsets;    // element offset of each parameter's gradient in buffer

  // Each parameter's gradient as a view of buffer, shaped like the parameter.
  std::vector<Tensor> gradients() const;
};

struct PendingReduction {
  std::shared_ptr<comm::Work> work;
  std::function<void()> finish;  // may be empty
};

using CommHook = std::function<PendingReduction(void* state, comm::ProcessGroup& group, GradBucket& bucket)>;

// t *= alpha in place, on t's device (on the current stream): a hook's
// averaging step (PyTorch's div_).
void scale_in_place(const Tensor& t, double alpha);
// dst = alpha * src (same dtype, device and size; dst may be src), on the
// current stream: the Reducer's averaging copy into a bucket.
void scale_into(const Tensor& src, const Tensor& dst, double alpha);

// Divides the bucket by the world size and sums it: the default (PyTorch's allreduce_hook).
CommHook allreduce_hook();
// Casts the bucket to f16 (or bf16), divides by the world size there, sums
// that, and casts back: half the bytes on the wire, at the cost of 16-bit
// rounding of each rank's contribution and of the sum (PyTorch's
// fp16_compress_hook / bf16_compress_hook, step for step).
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

}  // namespace tandem::ddp
