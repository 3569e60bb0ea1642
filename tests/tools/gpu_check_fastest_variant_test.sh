#!/usr/bin/env bash
# tools/gpu-check.sh's fastest_variant (the compare phase re-runs the fastest eager variant as a graph
# step): it picks the variant with the most bf16 samples/s from `tandem bench step`'s files, compares
# the figures as numbers, passes over a variant whose file is missing or has no bf16 line (a failed
# run), and falls back to default when none has a figure (a rehearsal). winners_envs (the switches of
# every variant at least 1 % faster than default, together): the faster variant's value of a switch
# two of them set, nothing without default's figure.
# Usage: gpu_check_fastest_variant_test.sh REPO_ROOT
set -uo pipefail
root=$1
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
for f in variant_envs variant_rate fastest_variant winners_envs; do
  eval "$(sed -n "/^$f() {/,/^}/p" "$root/tools/gpu-check.sh")"
done
declare -F variant_envs variant_rate fastest_variant winners_envs >/dev/null
check "gpu-check.sh defines the four functions" $?
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

step default 10000.0
step split 11000.0                 # TANDEM_ATTENTION_BACKWARD=split
step saved_split_pipelined 10500.0 # TANDEM_ATTENTION_DROPOUT_KEEP=saved TANDEM_ATTENTION_BACKWARD=split_pipelined
step philox7 10050.0               # 0.5 % faster: not a winner
step first 9000.0
rm -f "$res/compare_eager_cfg_combined.txt"
winners=()
winners_envs cfg default split saved_split_pipelined philox7 first combined
[ "${winners[*]}" = "TANDEM_ATTENTION_BACKWARD=split TANDEM_ATTENTION_DROPOUT_KEEP=saved" ]
check "winners: the faster variant's backward, the other's saved bits, nothing from the slower ones (${winners[*]})" $?
envs=()
variant_envs winners; [ "${envs[*]}" = "${winners[*]}" ]; check "variant_envs winners gives those switches" $?
winners_envs other default split
[ ${#winners[@]} = 0 ]; check "winners: none without default's figure" $?
finish
