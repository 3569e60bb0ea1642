#!/usr/bin/env bash
# tools/gpu_verdicts.py on the second and third GPU runs' files (docs/results/gpu/): rows matched by
# key, the ratios and counts against figures worked out by hand from those files, a comparison whose
# file is missing reported as not run, and a folder without any of the files refused.
# Usage: gpu_verdicts_test.sh REPO_ROOT
set -uo pipefail
root=$1
third=$root/docs/results/gpu/2026-11-28-third
second=$root/docs/results/gpu/2026-11-27-second
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
python3 "$root/tools/gpu_verdicts.py" "$third" --out "$tmp/third.md" >"$tmp/stdout" 2>&1
check "the third run's folder reads" $?
cmp -s "$tmp/stdout" "$tmp/third.md"; check "--out holds what was printed" $?
# 25 % real rows: trimmed against every key tile, 6 shapes x fwd and bwd, all faster
# (e.g. 8 x 512 x 12 x 64 forward 0.048 ms every tile).
grep -q "^- TANDEM_ATTENTION_KEY_TILES=trimmed (25 % real): faster in 12 of 12 rows, geometric mean 0.607x the time$" \
  "$tmp/third.md"; check "attention rows pair by shape, both passes (trimmed: 12 of 12)" $?
# With dropout, split's backward against fused's: 0.211 against 0.234 ms at head dim 32, and so on.
grep -q "^- split backward against fused (bf16, dropout 0.1): faster in 4 of 6 rows," "$tmp/third.md"
check "a backward-only comparison counts the six shapes once (4 of 6)" $?
grep -q "^| layer_norm | f32 | 32768x256 | bwd | 61.34 | 40.03 | 0.653 |$" "$tmp/third.md"
check "kernels rows pair by op, dtype, shape and direction (lanes' backward: 40.03 against 61.34 us)" $?
grep -q "^- TANDEM_PARAMETER_CASTS=batched (fortunes_demo, graph): not run (bench_step_graph_batched_casts.txt missing)$" \
  "$tmp/third.md"; check "a comparison whose file the run lacks says not run, naming it" $?
python3 "$root/tools/gpu_verdicts.py" "$second" >"$tmp/second.md" 2>&1
# compare's eager variants against the default: 8.29 against 9.67 ms.
grep -q "^- compare's opt_in_fused variant (ag_news_optimized, eager): faster in 1 of 1 rows, geometric mean 0.857x the time$" \
  "$tmp/second.md"; check "compare's eager variants are found by name and set against their config's default" $?
grep -q "^- fused backward against split (f32): faster in 5 of 6 rows" "$tmp/second.md"
check "a run whose attention tables lack the dropout and real columns still pairs its rows" $?
mkdir "$tmp/empty"
python3 "$root/tools/gpu_verdicts.py" "$tmp/empty" >"$tmp/empty.log" 2>&1
[ $? -ne 0 ] && grep -q "has none of the bench or compare files" "$tmp/empty.log"
check "a folder with none of the files is refused, with a non-zero exit" $?
python3 "$root/tools/gpu_verdicts.py" "$tmp/nowhere" >"$tmp/nowhere.log" 2>&1
[ $? -ne 0 ] && grep -q "is not a folder" "$tmp/nowhere.log"; check "a missing folder is refused by name" $?
finish
