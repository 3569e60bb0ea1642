// core/op_scope.h: what an op observer sees of the scopes opened on its thread.
#include "core/op_scope.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tandem {
namespace {

// Records "+name" / "+name(bw)" on begin and "-" on end.
class Recorder final : public OpObserver {
 public:
  void begin(std::string_view name, bool backward) override {
    if (throw_next) {
      throw_next = false;
      throw std::runtime_error("begin failed");
    }
    std::string e = "+";
    e.append(name);
    if (backward) e.append("(bw)");
    events.push_back(e);
  }
  void end() noexcept override { events.push_back("-"); }
  std::vector<std::string> events;
  bool throw_next = false;
};

// Uninstalls the observer whatever a test does.
struct Installed {
  explicit Installed(OpObserver* o) { set_op_observer(o); }
  ~Installed() { set_op_observer(nullptr); }
};

TEST(OpScope, OnlyTheOutermostScopeIsReported) {
  Recorder r;
  Installed on(&r);
  {
    OpScope outer("LinearBackward", true);
    OpScope inner("linear");  // a backward that calls a public op: its time is the backward's
  }
  OpScope next("layer_norm");
  EXPECT_EQ(r.events, (std::vector<std::string>{"+LinearBackward(bw)", "-", "+layer_norm"}));
}

TEST(OpScope, ScopesWithoutAnObserverAreNotSeenByOneInstalledLater) {
  Recorder r;
  {
    OpScope before("linear");
    Installed on(&r);
    OpScope inside("gelu");  // opened under the observer: reported although an unobserved scope is open
  }
  EXPECT_EQ(r.events, (std::vector<std::string>{"+gelu", "-"}));
}

TEST(OpScope, AnotherThreadsScopesAreNotObserved) {
  Recorder r;
  Installed on(&r);
  std::thread([] { OpScope elsewhere("tokenize"); }).join();
  { OpScope here("embedding"); }
  EXPECT_EQ(r.events, (std::vector<std::string>{"+embedding", "-"}));
}

TEST(OpScope, AScopeEndsOnTheObserverItBeganOn) {
  Recorder first, second;
  set_op_observer(&first);
  {
    OpScope s("attention");
    set_op_observer(&second);
  }
  set_op_observer(nullptr);
  EXPECT_EQ(first.events, (std::vector<std::string>{"+attention", "-"}));
  EXPECT_TRUE(second.events.empty());
}

TEST(OpScope, ABeginThatThrowsLeavesTheNextScopeReported) {
  Recorder r;
  Installed on(&r);
  r.throw_next = true;
  EXPECT_THROW(OpScope("linear"), std::runtime_error);
  { OpScope s("gelu"); }
  EXPECT_EQ(r.events, (std::vector<std::string>{"+gelu", "-"}));
}

}  // namespace
}  // namespace tandem
