// Whether differentiable ops record the graph on this thread.
//
// NoGradGuard turns recording off for a scope (evaluation, optimizer updates,
// DDP's bucket copies); it nests and restores the previous mode.
#pragma once

namespace tandem {

class GradMode {
 public:
  static bool enabled();
  static void set_enabled(bool enabled);
};

class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tandem
