#!/usr/bin/env bash
# tools/gpu-check.sh returns its results in two files under $OUT, because the
# device tool brings back at most 8: summary.txt (every phase's summary so
# far, in order) and gpu-check.tar.gz (every file the phases wrote). The probe
# phase runs without a GPU, so this checks that on any machine.
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
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
