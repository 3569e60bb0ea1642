// Work: the handle of one asynchronous collective.
//
// A backend creates a Work when an op is issued, marks it started when it
// really begins moving data (not when it was queued) and completed or failed
// when it ends; those two steady_clock stamps are what DDP uses to measure
// how much communication overlapped computation. The Work holds the op's
// tensors, so their memory stays valid until the op is over even if the
// caller drops its handles.
//
// wait(timeout) returns true once the op completed, false if `timeout`
// passed first (the op goes on; the backend's own op timeout guarantees it
// eventually completes or fails), and throws tandem::Error when the op failed,
// with the backend's message naming the peer rank at fault.
//
// For CUDA tensors, "completed" means the result is in the tensor and visible
// to the stream the op was issued on (see ProcessGroup).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem::comm {

class Work {
 public:
  using Clock = std::chrono::steady_clock;

  Work(std::string op_name, std::vector<Tensor> tensors);
  virtual ~Work() = default;

  bool wait(std::chrono::milliseconds timeout);
  bool is_completed() const;  // finished successfully
  bool is_failed() const;
  bool is_finished() const { return is_completed() || is_failed(); }
  std::string error() const;  // the failure message; empty unless is_failed()
  const std::string& op_name() const { return op_name_; }

  // When the backend started and finished the op; Clock::time_point{} until then.
  Clock::time_point start_time() const;
  Clock::time_point end_time() const;

  // --- for backends ----------------------------------------------------------
  void mark_started(Clock::time_point when = Clock::now());
  void mark_completed(Clock::time_point when = Clock::now());
  void mark_failed(const std::string& message);  // no effect once finished
  void release_tensors();                        // drops the held references

 private:
  enum class State { Pending, Completed, Failed };
  std::string op_name_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  State state_ = State::Pending;
  std::string error_;
  Clock::time_point start_{}, end_{};
  std::vector<Tensor> tensors_;
};

}  // namespace tandem::comm
