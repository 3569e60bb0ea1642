// TANDEM_DISTRIBUTED_DEBUG / TORCH_DISTRIBUTED_DEBUG: the levels, and which variable wins.
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/debug_level.h"
#include "core/check.h"

namespace tandem::comm {
namespace {

TEST(DebugLevel, OffInfoAndDetailInAnyCase) {
  EXPECT_EQ(parse_debug_level("", "X"), DebugLevel::Off);
  EXPECT_EQ(parse_debug_level("off", "X"), DebugLevel::Off);
  EXPECT_EQ(parse_debug_level("INFO", "X"), DebugLevel::Info);
  EXPECT_EQ(parse_debug_level("Detail", "X"), DebugLevel::Detail);
}

TEST(DebugLevel, AnythingElseIsAnErrorNamingTheVariable) {
  try {
    parse_debug_level("2", "TANDEM_DISTRIBUTED_DEBUG");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_DISTRIBUTED_DEBUG='2' is not a debug level (OFF, INFO, DETAIL)"),
              std::string::npos)
        << e.what();
  }
}

TEST(DebugLevel, TandemsVariableWinsOverTorchsWhichWinsOverNothing) {
  ::unsetenv("TANDEM_DISTRIBUTED_DEBUG");
  ::unsetenv("TORCH_DISTRIBUTED_DEBUG");
  EXPECT_EQ(distributed_debug_level(), DebugLevel::Off);
  ::setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
  EXPECT_EQ(distributed_debug_level(), DebugLevel::Detail);
  ::setenv("TANDEM_DISTRIBUTED_DEBUG", "OFF", 1);
  EXPECT_EQ(distributed_debug_level(), DebugLevel::Off);
  ::unsetenv("TANDEM_DISTRIBUTED_DEBUG");
  ::unsetenv("TORCH_DISTRIBUTED_DEBUG");
}

}  // namespace
}  // namespace tandem::comm
