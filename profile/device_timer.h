// Times intervals on a GPU with CUDA events, without ever blocking the host.
//
// mark() records a timing event on the device's current stream and returns a
// shared handle; elapsed_ms(a, b) is the device time between two marks, and
// is empty until both events have completed: it queries, it never
// synchronises, so a caller reads intervals only once the host has caught up
// for its own reasons (a logging step's loss read-back). Events come from a
// pool and return to it with their last handle, so a steady-state loop creates
// no events.
//
// Device times map onto the host's steady_clock through an anchor: anchor()
// synchronises the device once, records an event on the idle stream and notes
// the host time around it; a mark's host time is then the anchor's plus the
// elapsed time from the anchor. Only a profiling window, which asked for that
// synchronisation, anchors.
//
// Needs a GPU: the constructor throws tandem::Error without one.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/stream.h"

namespace tandem::profile {

class DeviceTimer {
 public:
  using Clock = std::chrono::steady_clock;
  using Mark = std::shared_ptr<const cuda::Event>;

  explicit DeviceTimer(int device);
  int device() const { return device_; }

  Mark mark();  // on cuda::current_stream(device())
  // Milliseconds from a to b on the device; empty while either has not completed.
  static std::optional<double> elapsed_ms(const Mark& a, const Mark& b);

  void anchor();
  bool anchored() const { return anchor_ != nullptr; }
  // The host steady_clock time of a completed mark (needs an anchor).
  std::optional<Clock::time_point> host_time(const Mark& m) const;

 private:
  struct Pool {
    std::mutex mutex;
    std::vector<std::unique_ptr<cuda::Event>> free;
  };
  int device_;
  std::shared_ptr<Pool> pool_;
  Mark anchor_;
  Clock::time_point anchor_host_;
};

}  // namespace tandem::profile
