// A steady_clock stand-in that moves only when a test says so: profiler
// tests check exact phase arithmetic without sleeping or timing anything.
#pragma once

#include <chrono>

namespace tandem::profile::testing {

class FakeClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  time_point now() const { return t_; }
  void advance_ms(double ms) {
    t_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }
  static time_point at_ms(double ms) {
    return time_point{} + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double, std::milli>(1000.0 + ms));
  }

 private:
  time_point t_ = at_ms(0);  // 1 s after the epoch, so that "zero" is never a valid reading
};

}  // namespace tandem::profile::testing
