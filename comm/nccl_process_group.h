// The `nccl` backend: NCCL collectives on this rank's GPU.
//
// One communicator per group, created non-blocking from a unique id that
// rank 0 publishes in the store ("nccl/<group>/id"), so that init, every op
// and shutdown can be bounded and aborted. Each op is enqueued on the caller's
// current stream of the group's device; host callbacks on that stream stamp
// the Work's start and end, so the Work completes when the GPU finished the
// op (and the DDP Reducer can order later work with an event instead of a
// host wait).
//
// A watchdog thread polls the communicator's asynchronous error, the
// in-flight ops' deadlines (options.timeout from issue) and the store's
// abort key. On any of them it aborts the communicator and fails every
// in-flight Work with a message naming this rank, the op and, for timeouts,
// the ranks that never reached it (comm/stuck_ranks.h); later ops fail at once.
// Only built with CUDA.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "comm/store.h"

namespace tandem::comm {

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, int device, ProcessGroupOptions options = {});
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }
  // Ops are enqueued on the caller's current stream.
  DeviceCompletion device_completion() const override { return DeviceCompletion::OnStream; }
  int device() const { return device_; }

  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> all_reduce(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int root) override;
  std::shared_ptr<Work> all_gather(const Tensor& in, Tensor& out) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  std::shared_ptr<Work> barrier() override;

 private:
  // Enqueues `call(comm, stream)` between two timestamping host callbacks.
  using Call = std::function<int(void* comm, void* stream)>;  // returns an ncclResult_t
  std::shared_ptr<Work> issue(const std::string& name, std::vector<Tensor> tensors, const Call& call);
  void check_device(const char* op, const Tensor& t) const;
  void wait_not_in_progress(std::chrono::steady_clock::time_point deadline, const std::string& what);
  void watchdog();
  void abort_locked(const std::string& why);  // mutex_ held

  std::shared_ptr<Store> store_;
  ProcessGroupOptions options_;
  std::string prefix_;
  int device_;
  void* comm_ = nullptr;  // ncclComm_t; null once aborted

  struct InFlight {
    std::shared_ptr<void> record;  // what the op's host callbacks point to (see the .cc)
    std::shared_ptr<Work> work;
    uint64_t seq;
    std::chrono::steady_clock::time_point deadline;
  };
  std::mutex mutex_;  // guards comm_ calls, in_flight_, broken_
  std::condition_variable cv_;
  std::vector<InFlight> in_flight_;
  std::string broken_;
  uint64_t op_count_ = 0;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace tandem::comm
