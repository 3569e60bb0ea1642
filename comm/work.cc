#include "comm/work.h"

#include "core/check.h"

namespace tandem::comm {

Work::Work(std::string op_name, std::vector<Tensor> tensors)
    : op_name_(std::move(op_name)), tensors_(std::move(tensors)) {}

bool Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [&] { return state_ != State::Pending; };
  // now() + milliseconds::max() would overflow: treat absurd timeouts as "forever".
  if (timeout >= std::chrono::hours(24 * 365)) cv_.wait(lock, done);
  else cv_.wait_for(lock, timeout, done);
  if (state_ == State::Failed) TANDEM_FAIL("{} failed: {}", op_name_, error_);
  return state_ == State::Completed;
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_ == State::Completed;
}

bool Work::is_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_ == State::Failed;
}

std::string Work::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

Work::Clock::time_point Work::start_time() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return start_;
}

Work::Clock::time_point Work::end_time() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_;
}

void Work::mark_started(Clock::time_point when) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (start_ == Clock::time_point{}) start_ = when;
}

void Work::mark_completed(Clock::time_point when) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ != State::Pending) return;
    if (start_ == Clock::time_point{}) start_ = when;
    end_ = when;
    state_ = State::Completed;
  }
  cv_.notify_all();
}

void Work::mark_failed(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ != State::Pending) return;
    end_ = Clock::now();
    if (start_ == Clock::time_point{}) start_ = end_;
    error_ = message;
    state_ = State::Failed;
  }
  cv_.notify_all();
}

void Work::release_tensors() {
  std::lock_guard<std::mutex> lock(mutex_);
  tensors_.clear();
}

}  // namespace tandem::comm
