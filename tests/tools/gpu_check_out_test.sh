#!/usr/bin/env bash
# tools/gpu-check.sh returns its results in two files under $OUT, because the
# device tool brings back at most 8: summary.txt (every phase's summary so
# far, in order) and gpu-check.tar.gz (every file the phases wrote). The probe
# phase runs without a GPU, so this checks that on any machine; and DEADLINE,
# which caps the phases' limits at the time left and skips a phase past it.
# Usage: gpu_check_out_test.sh REPO_ROOT
set -uo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=0 fails=0
check() {  # check NAME CONDITION-RESULT
  if [ "$2" = 0 ]; then echo "ok: $1"; passes=$((passes + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
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
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
