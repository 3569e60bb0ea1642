#!/usr/bin/env bash
# tools/gpu-check.sh's fastest_variant (the compare phase re-runs the fastest eager variant as a graph
# step): it picks the variant with the most bf16 samples/s from `tandem bench step`'s files, compares
# the figures as numbers, passes over a variant whose file is missing or has no bf16 line (a failed
# run), and falls back to default when none has a figure (a rehearsal).
# Usage: gpu_check_fastest_variant_test.sh REPO_ROOT
set -uo pipefail
root=$1
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
eval "$(sed -n '/^fastest_variant() {/,/^}/p' "$root/tools/gpu-check.sh")"
declare -F fastest_variant >/dev/null; check "gpu-check.sh defines fastest_variant" $?
step() {  # step VARIANT SAMPLES_PER_SECOND: a bench step file as the phase writes it
  printf '# precision   samples/s    step ms        p10-p90  forward ms  backward ms  optimizer ms   peak MiB\n' \
    >"$res/compare_eager_cfg_$1.txt"
  printf '       bf16  %10s       6.83     6.8-6.9           2.10         4.00          0.40     1300.0\n' "$2" \
    >>"$res/compare_eager_cfg_$1.txt"
}
step default 18742.5
step combined 21003.1
step split 9999.9
[ "$(fastest_variant cfg default combined split)" = combined ]; check "the most samples/s wins" $?
step split 100000.0
[ "$(fastest_variant cfg default combined split)" = split ]; check "figures compare as numbers, not strings" $?
echo "error: no CUDA device is available" >"$res/compare_eager_cfg_split.txt"
[ "$(fastest_variant cfg default combined split missing)" = combined ]
check "a failed run and a missing file are passed over" $?
[ "$(fastest_variant other default combined)" = default ]; check "no figures at all: default" $?
finish
