// OpScope: a named piece of a step's work, for an op profiler.
//
// Every public op of kernels/ opens one for its forward ("linear"), and the
// autograd engine one around each node's backward ("LinearBackward"). They do
// nothing unless this thread has an OpObserver installed (set_op_observer),
// which costs one thread-local read per op. Only the outermost scope is
// reported: an op that calls other public ops (a backward that calls
// `linear`, attention that calls `cast`) counts their work as its own, so the
// reported scopes never overlap and their times add up.
//
// Per thread: the training thread's ops are observed, a data-loader worker's
// are not.
#pragma once

#include <string_view>

namespace tandem {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // The outermost scope on this thread opened (`backward`: an autograd node's backward) and
  // closed. end() runs in a destructor and must not throw.
  virtual void begin(std::string_view name, bool backward) = 0;
  virtual void end() noexcept = 0;
};

// Installs `observer` for this thread (nullptr: none), between ops: the caller keeps it alive
// until the scopes opened under it have closed.
void set_op_observer(OpObserver* observer);
OpObserver* op_observer();

class OpScope {
 public:
  explicit OpScope(std::string_view name, bool backward = false);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpObserver* reported_ = nullptr;  // the observer this scope opened with, if it was the outermost
  bool counted_ = false;            // whether it counts in this thread's depth
};

}  // namespace tandem
