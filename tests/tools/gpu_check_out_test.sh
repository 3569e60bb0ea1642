#!/usr/bin/env bash
# tools/gpu-check.sh returns its results in two files under $OUT, because the
# device tool brings back at most 8: summary.txt (every phase's summary so
# far, in order) and gpu-check.tar.gz (every file the phases wrote). The probe
# phase runs without a GPU, so this checks that on any machine; and DEADLINE,
# which caps the phases' limits at the time left and skips a phase past it.
# The test and others phases run in a stand-in build folder (CMake, no compiler)
# whose two tests record that they ran: test runs only the GPU-marked one,
# others only the other, both with TANDEM_REQUIRE_GPU=1.
# Usage: gpu_check_out_test.sh REPO_ROOT
set -uo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
OUT=$tmp/out GPU_CHECK_DIR=$tmp/work "$root/tools/gpu-check.sh" probe >"$tmp/log" 2>&1
check "the probe phase passes" $?
files=$(find "$tmp/out" -type f -printf '%f\n' | sort | tr '\n' ' ')
[ "$files" = "gpu-check.tar.gz summary.txt " ]; check "\$OUT holds summary.txt and gpu-check.tar.gz only (got: $files)" $?
head -1 "$tmp/out/summary.txt" | grep '^# probe ' >/dev/null; check "summary.txt starts with the probe's summary" $?
tar -tzf "$tmp/out/gpu-check.tar.gz" | grep '^\./probe\.log$' >/dev/null; check "the tarball holds the probe's full log" $?
OUT=$tmp/out2 GPU_CHECK_DIR=$tmp/work2 "$root/tools/gpu-check.sh" probe nonsense >"$tmp/log2" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "unknown phase 'nonsense'" "$tmp/log2"; check "an unknown phase is refused by name with exit 2, before any phase runs" $?
[ ! -e "$tmp/work2/probe.txt" ]; check "nothing ran before the refusal" $?
OUT=$tmp/out3 GPU_CHECK_DIR=$tmp/work3 DEADLINE=0 "$root/tools/gpu-check.sh" probe >"$tmp/log3" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "^not run: 0 s of DEADLINE=0 left" "$tmp/out3/summary.txt"; check "a phase past DEADLINE does not start, says so in summary.txt and fails the run" $?
[ ! -e "$tmp/work3/probe.log" ]; check "the phase past DEADLINE wrote no log" $?
OUT=$tmp/out4 GPU_CHECK_DIR=$tmp/work4 DEADLINE=300 PHASE_TIMEOUT=480 "$root/tools/gpu-check.sh" probe >"$tmp/log4" 2>&1
grep -Eq "^==== phase probe \(limit (29[0-9]|300) s\)" "$tmp/log4"; check "DEADLINE caps a phase's limit at the time left" $?

# A stand-in build: one test named as ctest names a parameterized GPU test from the sources, one not.
gpu_name=$(cd "$root" && bash -c 'source <(sed -n "/^gpu_test_regex()/,/^}/p" tools/gpu-check.sh); gpu_test_regex' |
  tr -d '()' | cut -d'|' -f1 | tr -d '\\')
mkdir -p "$tmp/fake"
printf '#!/bin/sh\necho "${TANDEM_REQUIRE_GPU:-unset}" >"$1"\n' >"$tmp/fake/record.sh"
cat >"$tmp/fake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(fake NONE)
enable_testing()
add_test(NAME "Prefix/$gpu_name/bf16" COMMAND sh "$tmp/fake/record.sh" "$tmp/gpu_ran")
add_test(NAME "NotOnTheGpu.RunsInCi" COMMAND sh "$tmp/fake/record.sh" "$tmp/cpu_ran")
CMAKE
cmake -S "$tmp/fake" -B "$tmp/fake-build" -G Ninja >"$tmp/cmake.log" 2>&1
check "the stand-in build folder configures (GPU test: $gpu_name)" $?
OUT=$tmp/out5 GPU_CHECK_DIR=$tmp/work5 BUILD=$tmp/fake-build "$root/tools/gpu-check.sh" test >"$tmp/log5" 2>&1
check "the test phase passes when its tests do" $?
[ "$(cat "$tmp/gpu_ran" 2>/dev/null)" = 1 ]; check "the test phase runs the GPU test with TANDEM_REQUIRE_GPU=1" $?
[ ! -e "$tmp/cpu_ran" ]; check "the test phase leaves the other tests to the others phase" $?
grep -q "100% tests passed, 0 tests failed out of 1" "$tmp/out5/summary.txt"; check "the test phase's summary counts its one test" $?
rm -f "$tmp/gpu_ran"
OUT=$tmp/out6 GPU_CHECK_DIR=$tmp/work6 BUILD=$tmp/fake-build "$root/tools/gpu-check.sh" others >"$tmp/log6" 2>&1
check "the others phase passes when its tests do" $?
[ "$(cat "$tmp/cpu_ran" 2>/dev/null)" = 1 ]; check "the others phase runs the other test with TANDEM_REQUIRE_GPU=1" $?
[ ! -e "$tmp/gpu_ran" ]; check "the others phase does not run the GPU test again" $?
finish
