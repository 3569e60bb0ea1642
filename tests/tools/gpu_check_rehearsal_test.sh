#!/usr/bin/env bash
# tools/gpu-check.sh's rehearsal (GPU_CHECK_REHEARSAL=1) on a machine without a GPU: every command of
# the bench, compare, kdetail and kprofile phases sets only switches `tandem info` takes and reports, and accepts
# all its options, stopping only at the missing GPU. So the GPU session's few minutes do not go to a
# row refused for a typo (the third run lost the padded cuDNN row to an option cuDNN's row takes none
# of). Then a copy of the script with three such mistakes, to show that the rehearsal catches each.
# Usage: gpu_check_rehearsal_test.sh REPO_ROOT BUILD_DIR (a CUDA build, built)
set -uo pipefail
root=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if "$build/apps/tandem" info 2>/dev/null | grep -Eq '^cuda devices: [1-9]'; then
  echo "skipped: this machine has a GPU, so the commands would run; tools/gpu-check.sh runs them there"
  exit 77
fi
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"

GPU_CHECK_REHEARSAL=1 BUILD=$build OUT=$tmp/out GPU_CHECK_DIR=$tmp/work "$root/tools/gpu-check.sh" \
  bench compare kdetail kprofile >"$tmp/log" 2>&1
check "every bench, compare, kdetail and kprofile command rehearses cleanly" $?
grep "^rehearsal of" "$tmp/log"
! grep "command not found" "$tmp/log"; check "the phases' shells find every function they call" $?
grep -q "== compare_graph_ag_news_optimized_fastest (rehearsal): ok" "$tmp/work/compare.log" &&
  [ "$(cat "$tmp/work/compare_graph_ag_news_optimized_fastest.variant")" = default ]
check "the fastest eager variant's graph step is rehearsed (default, with no figures to pick by)" $?
n=$(cat "$tmp/work/bench.log" "$tmp/work/compare.log" "$tmp/work/kdetail.log" "$tmp/work/kprofile.log" 2>/dev/null | grep -c "(rehearsal): ok")
[ "$n" -ge 50 ]; check "the rehearsal checked the phases' commands ($n of them)" $?
python3 "$root/tools/gpu_verdicts.py" "$tmp/work" >"$tmp/verdicts" 2>&1
! grep "not run" "$tmp/verdicts"; check "every file tools/gpu_verdicts.py reads is one the phases write" $?
# A compare phase short of time skips eager variants but keeps its last minute for the graph step the
# goals are read from.
GPU_CHECK_REHEARSAL=1 PHASE_TIMEOUT=50 BUILD=$build OUT=$tmp/out_short GPU_CHECK_DIR=$tmp/work_short \
  "$root/tools/gpu-check.sh" compare >"$tmp/log_short" 2>&1
grep -q "ag_news_optimized: the eager variants from default on not run (under 60 s of the phase left)" "$tmp/work_short/compare.txt" &&
  grep -q "== compare_graph_ag_news_optimized_fastest (rehearsal): ok" "$tmp/work_short/compare.log" &&
  ! grep -q "compare_eager_" "$tmp/work_short/compare.log"
check "a compare phase under a minute from its limit runs no eager variant but still the graph step" $?
# The peers phase runs only Python (its commands are not rehearsed), but writes the SDPA file the goals read.
GPU_CHECK_REHEARSAL=1 BUILD=$build OUT=$tmp/out GPU_CHECK_DIR=$tmp/work "$root/tools/gpu-check.sh" peers >"$tmp/log_peers" 2>&1
missing=$(cd "$root/tools" && python3 -c "import gpu_goals; print(*gpu_goals.READS, sep='\\n')" |
  while read -r f; do [ -e "$tmp/work/$f" ] || echo "$f"; done)
[ -z "$missing" ]; check "every file tools/gpu_goals.py reads is one the phases write (missing: ${missing:-none})" $?

# The mistakes: an option the row does not take, a misspelt switch, a value the switch does not have.
mkdir -p "$tmp/repo/tools"
for d in configs tests bench; do ln -s "$root/$d" "$tmp/repo/$d"; done
sed -e 's/"bf16_wide:--dtype bf16 --forward pipelined_wide"/"bf16_wide:--dtype bf16 --forward pipelined_wide --backend cudnn"/' \
  -e 's/capture bench_attention_bf16_dropout_fused_waves 120 env TANDEM_ATTENTION_FUSED_CHUNKS=waves/capture bench_attention_bf16_dropout_fused_waves 120 env TANDEM_ATTENTION_FUSED_CHUNK=waves/' \
  -e 's/fused_waves) envs=(TANDEM_ATTENTION_FUSED_CHUNKS=waves)/fused_waves) envs=(TANDEM_ATTENTION_FUSED_CHUNKS=wave)/' \
  "$root/tools/gpu-check.sh" >"$tmp/repo/tools/gpu-check.sh"
[ "$(diff "$root/tools/gpu-check.sh" "$tmp/repo/tools/gpu-check.sh" | grep -c '^>')" = 3 ]
check "the copy has the three mistakes (if not, the lines it edits changed: update this test)" $?
GPU_CHECK_REHEARSAL=1 BUILD=$build OUT=$tmp/out2 GPU_CHECK_DIR=$tmp/work2 bash "$tmp/repo/tools/gpu-check.sh" \
  bench compare >"$tmp/log2" 2>&1
[ $? = 1 ]; check "the rehearsal of the copy fails" $?
grep -q "^rehearsal of bench_attention_bf16_wide: it did not stop at the missing GPU" "$tmp/log2"
check "an option the row does not take is named with its row" $?
grep -q "^rehearsal of bench_attention_bf16_dropout_fused_waves: TANDEM_ATTENTION_FUSED_CHUNK=waves: tandem info does not report" "$tmp/log2"
check "a misspelt switch is named" $?
grep -q "^rehearsal of compare_eager_ag_news_optimized_fused_waves: tandem info refused the switches: .*TANDEM_ATTENTION_FUSED_CHUNKS" "$tmp/log2"
check "a value the switch does not have is named" $?
[ "$(grep -c "^rehearsal of" "$tmp/log2")" = 3 ]; check "nothing else is reported" $?
GPU_CHECK_REHEARSAL=1 BUILD=$tmp/no-build OUT=$tmp/out3 GPU_CHECK_DIR=$tmp/work3 "$root/tools/gpu-check.sh" bench \
  >"$tmp/log3" 2>&1
[ $? = 2 ] && grep -q "$tmp/no-build/apps/tandem is missing: build first" "$tmp/log3"
check "a rehearsal without a build is refused, naming the missing binary" $?
mkdir -p "$tmp/gpu-build/apps"
printf '#!/bin/sh\necho "cuda devices: 1"\n' >"$tmp/gpu-build/apps/tandem"
chmod +x "$tmp/gpu-build/apps/tandem"
GPU_CHECK_REHEARSAL=1 BUILD=$tmp/gpu-build OUT=$tmp/out4 GPU_CHECK_DIR=$tmp/work4 "$root/tools/gpu-check.sh" bench \
  >"$tmp/log4" 2>&1
[ $? = 2 ] && grep -q "GPU_CHECK_REHEARSAL is for a machine without a GPU" "$tmp/log4" && [ ! -e "$tmp/work4/bench.txt" ]
check "a rehearsal where tandem info sees a GPU is refused before any phase" $?
finish
