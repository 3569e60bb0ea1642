// Asserting on errors: that a call throws tandem::Error and that its message
// names what is at fault.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/check.h"

namespace tandem::testing {

template <class F>
::testing::AssertionResult throws_error_containing(F&& f, const std::string& text) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(text) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error \"" << e.what() << "\" does not contain \"" << text << "\"";
  }
  return ::testing::AssertionFailure() << "no tandem::Error was thrown (expected one containing \"" << text << "\")";
}

}  // namespace tandem::testing
