// TANDEM_REQUIRE_GPU(): the first line of every GPU test.
//
// Without a CUDA device the test is skipped with the reason, so the suite
// passes on CPU-only machines (CI). On the GPU machine a skip would hide a
// broken driver or a missing device, so tools/gpu-check.sh sets the
// environment variable TANDEM_REQUIRE_GPU=1, which turns every such skip into a
// failure with the same reason.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

#include "core/stream.h"

namespace tandem::testing {

inline bool gpu_tests_must_run() {
  const char* v = std::getenv("TANDEM_REQUIRE_GPU");
  return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
}

inline const char* why_no_gpu() {
  return ::tandem::cuda::built_with_cuda() ? "no CUDA device present" : "built without CUDA (TANDEM_CUDA=OFF)";
}

}  // namespace tandem::testing

#define TANDEM_REQUIRE_GPU()                                                                    \
  do {                                                                                          \
    if (!::tandem::cuda::available()) {                                                         \
      if (::tandem::testing::gpu_tests_must_run())                                              \
        FAIL() << ::tandem::testing::why_no_gpu() << ", and TANDEM_REQUIRE_GPU=1 asks for the GPU tests"; \
      GTEST_SKIP() << ::tandem::testing::why_no_gpu();                                          \
    }                                                                                           \
  } while (0)
