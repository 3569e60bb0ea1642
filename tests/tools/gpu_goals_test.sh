#!/usr/bin/env bash
# tools/gpu_goals.py on the second GPU run's files (docs/results/gpu/2026-11-27-second), against the
# goals table written by hand for that run (docs/results/gpu.md); a folder mixing the third run's
# default attention pair with the second run's SDPA rows; goals whose files are missing reported as not
# measured; a folder with none of the files refused.
# Usage: gpu_goals_test.sh REPO_ROOT
set -uo pipefail
root=$1
second=$root/docs/results/gpu/2026-11-27-second
third=$root/docs/results/gpu/2026-11-28-third
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
has() { grep -qF -- "$1" "$2"; }
python3 "$root/tools/gpu_goals.py" "$second" --out "$tmp/second.md" >"$tmp/stdout" 2>&1
check "the second run's folder reads" $?
cmp -s "$tmp/stdout" "$tmp/second.md"; check "--out holds what was printed" $?
# compare.json: Tandem 16189.7 samples/s, PyTorch eager 1417.2, compile 1771.3 (ag_news_small);
# 13612.6, 9669.1 and 19693.3 (ag_news_optimized).
has "| ag_news_small at least 3.0x PyTorch eager, graph step | 11.42x PyTorch eager (16190 against 1417 samples/s) | met |" \
  "$tmp/second.md"; check "ag_news_small's ratio to eager, met" $?
has "| ag_news_optimized at least 1.5x PyTorch eager, graph step | 1.41x PyTorch eager" "$tmp/second.md" &&
  has "| ag_news_optimized at least 1.2x PyTorch compile, graph step | 0.69x PyTorch compile (13613 against 19693 samples/s) | not met |" \
    "$tmp/second.md"; check "ag_news_optimized's ratios to eager and compile, not met" $?
# Device peaks: Tandem 1341490480 bytes against compile's 1714670592 (the closest): 0.78x.
has "at most 0.78x PyTorch's device peak (ag_news_optimized, PyTorch compile) | met |" "$tmp/second.md"
check "peak memory against the closest PyTorch peak" $?
# imdb bf16: 62796.5 GF/s of the 784.0 TFLOP/s bf16 GEMM ceiling: 8.0 % (docs/results/gpu.md: 8.0 %).
has "| imdb at least 30 % of the bf16 GEMM peak (model FLOPs) | 8.0 % (62.8 of 784.0 TFLOP/s" "$tmp/second.md"
check "imdb's model FLOP rate over the same run's GEMM ceiling" $?
has "| AdamW at least 85 % of copy | 92 % at 100.0 M parameters, 73 % at 10.0 M parameters | met |" "$tmp/second.md"
check "AdamW at its two largest sizes" $?
python3 "$root/tools/gpu_goals.py" "$third" >"$tmp/third.md" 2>&1
# The third run's hand count: 16 of 58 rows (its 62 cuda GB/s rows less the 64 x 4 cross-entropy's four).
has "| memory-bound kernels at least 80 % of copy (bench_kernels_training) | 16 of 58 rows;" "$tmp/third.md"
check "memory-bound rows at 80 % of copy, the launch-bound ones under 1 MB left out" $?
has "| ag_news_small at least 3.0x PyTorch eager, graph step | compare.json missing | not measured |" "$tmp/third.md"
check "a goal whose file the run lacks is not measured" $?
# SDPA (second run) 0.144 + 1.016 ms at 64 x 512 x 12 x 64; the default pair (third run) 0.317 + 1.198.
mkdir "$tmp/mixed"
cp "$second/peers_attention.txt" "$third/bench_attention_bf16_split_pipelined.txt" "$tmp/mixed/"
python3 "$root/tools/gpu_goals.py" "$tmp/mixed" >"$tmp/mixed.md" 2>&1
has "64 x 512 x 12 x 64 | SDPA 1.160 ms; default pair 1.515 ms (1.31x); fastest 1.515 ms" "$tmp/mixed.md" &&
  has "(1.31x: pipelined + split_pipelined, bench_attention_bf16_split_pipelined) | not met |" "$tmp/mixed.md"
check "attention's default pair against SDPA at the same shape" $?
# compare.json with an imdb run (here the second run's ag_news_optimized entries, renamed): its whole
# step against PyTorch's goes beside the model FLOP share.
mkdir "$tmp/imdb"
cp "$second/bench_kernels_bench.txt" "$second/bench_classifier_bench.txt" "$tmp/imdb/"
python3 - "$second/compare.json" "$tmp/imdb/compare.json" <<'PY'
import json, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    if e["config"] == "ag_news_optimized":
        e["config"] = "imdb"
json.dump(entries, open(sys.argv[2], "w"))
PY
python3 "$root/tools/gpu_goals.py" "$tmp/imdb" >"$tmp/imdb.md" 2>&1
has "at 32 x 512); whole step 1.41x PyTorch eager (13613 against 9669 samples/s); whole step 0.69x PyTorch compile" \
  "$tmp/imdb.md"; check "imdb's whole step against PyTorch's, where compare ran imdb" $?
! grep -q "whole step" "$tmp/second.md"; check "no whole-step figures for imdb where compare did not run it" $?
# The compare phase's fastest eager variant as a graph step (a planted bench step file): its ratios go
# under the default graph step's, named for the variant; without the files there are no such rows.
mkdir "$tmp/fastest"
cp "$second/compare.json" "$tmp/fastest/"
echo combined >"$tmp/fastest/compare_graph_ag_news_optimized_fastest.variant"
printf '# precision   samples/s    step ms\n       bf16     24615.4       5.20     5.1-5.3\n' \
  >"$tmp/fastest/compare_graph_ag_news_optimized_fastest.txt"
python3 "$root/tools/gpu_goals.py" "$tmp/fastest" >"$tmp/fastest.md" 2>&1
# 24615.4 / 9669.1 = 2.55; 24615.4 / 19693.3 = 1.25.
has "| ag_news_optimized at least 1.5x PyTorch eager, graph step with the fastest eager variant (combined) | 2.55x PyTorch eager (24615 against 9669 samples/s) | met |" \
  "$tmp/fastest.md" &&
  has "| ag_news_optimized at least 1.2x PyTorch compile, graph step with the fastest eager variant (combined) | 1.25x PyTorch compile (24615 against 19693 samples/s) | met |" \
    "$tmp/fastest.md"; check "the fastest eager variant's graph step against PyTorch, named" $?
has "| ag_news_optimized at least 1.2x PyTorch compile, graph step | 0.69x PyTorch compile" "$tmp/fastest.md"
check "the default graph step's row stays" $?
! grep -q "fastest eager variant" "$tmp/second.md"; check "no such rows without the phase's files" $?
echo "error: no CUDA device is available" >"$tmp/fastest/compare_graph_ag_news_optimized_fastest.txt"
python3 "$root/tools/gpu_goals.py" "$tmp/fastest" >"$tmp/fastest_failed.md" 2>&1
has "(combined) | no bf16 line in compare_graph_ag_news_optimized_fastest.txt | not measured |" "$tmp/fastest_failed.md"
check "a failed graph step of that variant is not measured, naming its file" $?
mkdir "$tmp/cut"
head -c 200 "$second/compare.json" >"$tmp/cut/compare.json"
python3 "$root/tools/gpu_goals.py" "$tmp/cut" >"$tmp/cut.log" 2>&1
[ $? -ne 0 ] && grep -q "$tmp/cut/compare.json: not compare.py's JSON" "$tmp/cut.log" && ! grep -q Traceback "$tmp/cut.log"
check "a compare.json cut off mid-write is refused by name, without a traceback" $?
mkdir "$tmp/empty"
python3 "$root/tools/gpu_goals.py" "$tmp/empty" >"$tmp/empty.log" 2>&1
[ $? -ne 0 ] && grep -q "has none of the files the goals are read from" "$tmp/empty.log"
check "a folder with none of the files is refused, with a non-zero exit" $?
finish
