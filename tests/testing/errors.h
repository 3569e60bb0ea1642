// Asserting on errors: that a call throws tandem::Error and that its message
// names what is at fault (an environment switch: its variable and the bad value).
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

// parse(bad) throws an Error whose message names `variable` and quotes `bad` (an environment switch).
template <class Parse>
::testing::AssertionResult rejects_naming_variable_and_value(Parse parse, const char* variable, const char* bad) {
  try {
    parse(bad);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(variable) == std::string::npos || what.find(std::string("'") + bad + "'") == std::string::npos)
      return ::testing::AssertionFailure() << "the error does not name " << variable << " and '" << bad << "': " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error for '" << bad << "'";
}

}  // namespace tandem::testing
