#include "ddp/comm_hook.h"

namespace tandem::ddp {

CommHook allreduce_hook() {
  return [](comm::ProcessGroup& group, GradBucket& bucket) {
    return PendingReduction{group.all_reduce(bucket.buffer, comm::ReduceOp::Sum), {}};
  };
}

namespace {
CommHook compress_hook(DType wire) {
  return [wire](comm::ProcessGroup& group, GradBucket& bucket) {
    Tensor compressed = bucket.buffer.to(wire);
    auto work = group.all_reduce(compressed, comm::ReduceOp::Sum);
    Tensor target = bucket.buffer;
    return PendingReduction{work, [compressed, target]() mutable { target.copy_(compressed); }};
  };
}
}  // namespace

CommHook fp16_compress_hook() { return compress_hook(DType::F16); }
CommHook bf16_compress_hook() { return compress_hook(DType::BF16); }

}  // namespace tandem::ddp
