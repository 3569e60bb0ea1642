// The `nccl` backend: NCCL collectives on this rank's GPU.
//
// One communicator per group, created non-blocking from a unique id that
// rank 0 publishes in the store ("nccl/<group>/id"), so that init, every op
// and shutdown can be bounded and aborted. Each op is enqueued on the caller's
// current stream of the group's device between two CUDA events; the watchdog
// thread polls them and stamps the Work's start and end, so the Work
// completes when the GPU finished the op (and the DDP Reducer can order later
// work on the stream instead of waiting on the host). As PyTorch's
// ProcessGroupNCCL: events polled by the watchdog, not host functions on the
// stream (a cudaLaunchHostFunc blocks the stream until a CUDA-owned host
// thread ran it, and serialises every stream's callbacks on that thread).
//
// The watchdog also polls the communicator's asynchronous error, the
// in-flight ops' deadlines (options.timeout from issue) and the store's
// abort key. On any of them it aborts the communicator and fails every
// in-flight Work with a message naming this rank, the op and, for timeouts,
// the ranks that never reached it (comm/stuck_ranks.h); later ops fail at once.
// An issue that waits for NCCL to finish enqueueing (a non-blocking
// communicator returns ncclInProgress) releases the watchdog's mutex between
// polls, so a peer's abort reaches it without waiting for its own deadline.
// Every CUDA call of the group, the watchdog's included, runs with the
// group's device current: no thread makes a context on another GPU.
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
  // Enqueues `call(comm, stream)` between the two events the watchdog polls.
  using Call = std::function<int(void* comm, void* stream)>;  // returns an ncclResult_t
  std::shared_ptr<Work> issue(const std::string& name, std::vector<Tensor> tensors, const Call& call);
  void check_device(const char* op, const Tensor& t) const;
  // Polls the communicator until it is not ncclInProgress; with `lock` (on
  // mutex_) given, releases it between polls.
  void wait_not_in_progress(std::chrono::steady_clock::time_point deadline, const std::string& what,
                            std::unique_lock<std::mutex>* lock = nullptr);
  void watchdog();
  void abort_locked(const std::string& why);  // mutex_ held

  std::shared_ptr<Store> store_;
  ProcessGroupOptions options_;
  std::string prefix_;
  int device_;
  void* comm_ = nullptr;  // ncclComm_t; null once aborted

  struct InFlight;  // an op's Work, its two events, sequence number and deadline (see the .cc)
  void poll_events();  // mutex_ held: stamps started ops, completes finished ones

  std::mutex issue_mutex_;  // one issue at a time: NCCL calls on a communicator must not interleave
  std::mutex mutex_;        // guards comm_ calls, in_flight_, spare_, broken_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<InFlight>> in_flight_;
  // Completed ops' records, events included, for reuse: creating and
  // destroying two CUDA events per collective costs driver calls that
  // ProcessGroupNCCL also avoids (its CUDA event cache).
  std::vector<std::unique_ptr<InFlight>> spare_;
  std::string broken_;
  uint64_t op_count_ = 0;
  bool stopping_ = false;
  bool issuing_ = false;  // an issue() waits for NCCL to finish enqueueing
  std::thread watchdog_;
};

}  // namespace tandem::comm
