// OpProfile: where a training step's time goes, op by op, averaged over steps.
//
// An OpObserver (core/op_scope.h): installed on the training thread, it
// times every outermost op scope, the forward of each public op of kernels/
// ("linear") and the backward of each autograd node ("LinearBackward"), and
// end_step() adds the step's intervals to the totals. Times are the host's
// steady_clock on the CPU; on a GPU (options.device_timer) they are CUDA
// events on the current stream around the op's launches, so an op's time is
// the device's, and end_step() needs the step's work finished (the caller
// synchronises first, as the bench's steps do).
//
// What it leaves out is the step's remainder: the optimizer, DDP's
// communication and waits, the data loader, and host work between ops.
// Recording events costs host time per op, so a launch-bound GPU step runs
// slower while observed: compare op times with each other, and the step time
// with an unobserved run.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/op_scope.h"
#include "profile/device_timer.h"

namespace tandem::profile {

struct OpProfileOptions {
  std::shared_ptr<DeviceTimer> device_timer;                  // a GPU run: time ops with CUDA events
  std::function<std::chrono::steady_clock::time_point()> now;  // host clock (tests inject one)
};

struct OpRow {
  std::string name;
  bool backward = false;
  double calls_per_step = 0;
  double ms_per_step = 0;
};

class OpProfile final : public OpObserver {
 public:
  explicit OpProfile(OpProfileOptions options = {});

  void begin(std::string_view name, bool backward) override;
  void end() noexcept override;

  // Adds the intervals since the last end_step() as one step. Throws tandem::Error when a
  // scope is still open, when a GPU event has not completed, or when recording one failed.
  void end_step();
  int steps() const { return steps_; }
  // Per step, largest first.
  std::vector<OpRow> rows() const;
  double ms_per_step() const;  // all ops together

 private:
  using Key = std::pair<std::string, bool>;
  struct Total {
    int64_t calls = 0;
    double ms = 0;
  };
  using Entry = std::map<Key, Total>::value_type;
  struct Pending {
    Entry* entry = nullptr;        // the op's totals (map nodes stay put)
    double host_ms = 0;            // host timing
    DeviceTimer::Mark begin, end;  // device timing
  };
  OpProfileOptions options_;
  std::map<Key, Total> totals_;
  std::vector<Pending> pending_;
  bool open_ = false;
  std::chrono::steady_clock::time_point open_since_;
  std::string failure_;
  int steps_ = 0;
};

}  // namespace tandem::profile
