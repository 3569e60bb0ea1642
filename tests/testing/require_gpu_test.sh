#!/usr/bin/env bash
# TANDEM_REQUIRE_GPU=1 turns a GPU test's skip into a failure that says why;
# without it, a machine with no GPU skips. On a GPU machine the test runs and
# passes either way. Usage: require_gpu_test.sh CORE_TESTS_BINARY
set -uo pipefail
bin=$1
filter=--gtest_filter=Streams.GuardMakesAStreamCurrentForItsScope
# shellcheck source=shell_checks.sh
source "$(dirname "$0")/shell_checks.sh"
required=$(TANDEM_REQUIRE_GPU=1 "$bin" "$filter" 2>&1); required_rc=$?
plain=$(env -u TANDEM_REQUIRE_GPU "$bin" "$filter" 2>&1); plain_rc=$?
if [[ "$plain" == *"[  SKIPPED ]"* ]]; then  # no GPU here
  check "without the variable, no GPU means skipped and passing" "$plain_rc"
  [ "$required_rc" -ne 0 ]; check "with TANDEM_REQUIRE_GPU=1 the same test fails" $?
  [[ "$required" == *"TANDEM_REQUIRE_GPU=1 asks for the GPU tests"* ]]; check "the failure says why" $?
else  # a GPU: the test runs
  check "on a GPU the test passes" "$plain_rc"
  check "on a GPU it passes with TANDEM_REQUIRE_GPU=1 too" "$required_rc"
fi
[[ "$required" != *"[  SKIPPED ]"* ]]; check "with TANDEM_REQUIRE_GPU=1 nothing is skipped" $?
finish
