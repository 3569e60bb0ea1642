// DebugProcessGroup: checks that every rank issues the same collective
// before it runs (PyTorch's ProcessGroupWrapper, which
// TORCH_DISTRIBUTED_DEBUG=DETAIL puts around a backend).
//
// Each op is described by a fingerprint: its sequence number in this group,
// the collective, the reduce op, the dtype, the element count and, for
// broadcast, the root. Before forwarding an op to the wrapped backend, every
// rank publishes its fingerprint in the store ("debug/<group>/<seq>/<rank>"),
// waits for all ranks' and compares them with rank 0's. All ranks see the
// same fingerprints, so a difference throws on every rank, from the op's
// call, naming the collective's number and the first rank that differs with
// both descriptions; a rank that never issues the op is named once
// options.timeout has passed. Nothing reaches the backend after a mismatch.
//
// Why through the store: a backend given mismatched ops may hang or reduce
// garbage (NCCL), so the check must not depend on the data path it guards.
// The cost, a few store round trips per op and a host wait before every op
// (so an op no longer overlaps the caller), is why it is off by default.
//
// Identical ops are indistinguishable: if a rank skips one of two identical
// all_reduces, the mismatch shows at the next op that differs, or as a
// missing rank at the end.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/store.h"

namespace tandem::comm {

class DebugProcessGroup final : public ProcessGroup {
 public:
  DebugProcessGroup(std::shared_ptr<ProcessGroup> inner, std::shared_ptr<Store> store,
                    ProcessGroupOptions options = {});

  std::string backend_name() const override { return inner_->backend_name(); }
  DeviceCompletion device_completion() const override { return inner_->device_completion(); }
  std::string transport() const override { return inner_->transport(); }
  std::string single_copy() const override { return inner_->single_copy(); }
  ProcessGroup& inner() { return *inner_; }

  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int root) override;
  std::shared_ptr<Work> all_gather(const Tensor& in, Tensor& out) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> barrier() override;

 private:
  // Compares this op's fingerprint with every rank's; throws on a difference
  // or a missing rank. Called with mutex_ held, so ops are checked and
  // forwarded in issue order.
  void check_same_on_all_ranks(const std::string& fingerprint);
  std::shared_ptr<Work> track(std::shared_ptr<Work> work);  // remembers it until it completes

  std::shared_ptr<ProcessGroup> inner_;
  std::shared_ptr<Store> store_;
  ProcessGroupOptions options_;
  std::string prefix_;  // "debug/<group>/"
  std::mutex mutex_;
  uint64_t seq_ = 0;
  std::vector<std::shared_ptr<Work>> issued_;  // not yet completed: a failed one ends the waits above
};

// "all_reduce(sum, f32, 100 elements)", "broadcast(f32, 8 elements, root 1)": what is compared.
std::string collective_fingerprint(std::string_view op, const Tensor& t, const ReduceOp* reduce, int root = -1);

}  // namespace tandem::comm
