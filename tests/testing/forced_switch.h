// A process-wide switch (core/env_switch.h) forced to one value for a scope, whatever the
// environment says: `set` is the switch's set_..._for_testing, and the destructor hands the
// choice back to the environment (nullopt). For tests on one thread, as the switches' forcing is.
//   const testing::ForcedSwitch master(kernels::set_linear_gradients_for_testing, LinearGradients::Master);
#pragma once

#include <optional>

namespace tandem::testing {

template <class V>
class ForcedSwitch {
 public:
  ForcedSwitch(void (*set)(std::optional<V>), V value) : set_(set) { set_(value); }
  ~ForcedSwitch() { set_(std::nullopt); }
  ForcedSwitch(const ForcedSwitch&) = delete;
  ForcedSwitch& operator=(const ForcedSwitch&) = delete;

 private:
  void (*set_)(std::optional<V>);
};

}  // namespace tandem::testing
