#!/usr/bin/env bash
# The GPU check, in phases that each end well inside the device tool's 10-minute
# limit and write their results under $OUT as they go (docs/device.md):
#
#     tools/gpu-check.sh [PHASE...]        (default: probe build test)
#
#   probe     what the machine has (tools/gpu-probe.sh)                 ~10 s
#   build     configure and build everything with CUDA, all cores       ~2 min
#   test      the GPU tests (those whose body or fixture calls
#             TANDEM_REQUIRE_GPU()) with TANDEM_REQUIRE_GPU=1, so a GPU test
#             that would skip fails instead                              ~1.5 min
#   others    every other test, with TANDEM_REQUIRE_GPU=1 too: CI runs
#             them without a GPU, so a plan short of device time runs
#             this phase last, or not at all                             ~2 min
#   sanitize  compute-sanitizer memcheck, then racecheck, on the GPU tests
#             of the kernel, attention and optimizer suites              ~5 min
#   bench     each benchmark with --device cuda, each under a timeout    ~3 min
#   compare   Tandem (one CUDA graph per step, and eager) against PyTorch
#             eager and torch.compile, bf16, synthetic data (bench/pytorch/
#             compare.py; COMPARE_CONFIGS, default ag_news_small
#             ag_news_optimized)                                         ~2 min
#   peers     PyTorch's side of the attention, kernel and optimizer
#             benchmarks (bench/pytorch/*_bench.py) on the same GPU      ~2 min
#   kprofile  GPU time by kernel in eager steps of ag_news_optimized and
#             imdb (ncu, tools/kernel_profile.py; KPROFILE_CONFIGS), and
#             by op (tandem bench ops)                                   ~2-4 min
#   kdetail   ncu's speed-of-light, occupancy, memory and stall sections for
#             the attention kernels, default and opt-in, at one bf16 shape ~2-4 min
#
# Each phase writes $OUT/<phase>.txt whose first lines are its summary
# (passed / failed / skipped with reasons, sanitizer errors, the table), with
# the whole log beside it, and prints that summary. A phase that needs the
# build builds only its own targets, so phases can be run in separate calls;
# but the device machine starts bare after 30 s idle, so give one call the
# phases that share a build. Each phase stops at its own time limit
# (PHASE_TIMEOUT seconds, default 480) and the next one still runs. DEADLINE
# (seconds from the start, unset by default) caps every phase's limit at the
# time left, and a phase with under 10 s left does not start: give the device
# call's timeout_s less a margin, so that a slow call ends with its last phase
# cut and packed (its runs so far kept) instead of killed with nothing back.
#
# Dependencies: if OFFLINE_BUNDLE names a folder made by
# scripts/offline-bundle.sh (carried to the machine), the build uses it
# (scripts/offline-build.sh); otherwise the system's packages. NCCL and cuDNN
# are found in the toolkit or pip's nvidia-* wheels (cmake/FindNCCL.cmake).
# CUDA_ARCH (default 90) picks the GPU architecture; BUILD (default build-gpu)
# the build folder. The exit status is 1 when any phase failed.
#
# GPU_CHECK_REHEARSAL=1, on a machine without a GPU and with BUILD built there
# (a CUDA build), rehearses the bench, compare, kdetail and kprofile phases: instead of
# running each command, it checks that `tandem info` takes and reports every
# switch the command sets (env VAR=VALUE: a misspelt variable would silently
# time the default), and that the command, ncu's options left out, accepts all
# its options and stops only at the missing GPU. It builds nothing and runs
# none of compare.py, ncu and kernel_profile.py. tests/tools/gpu_check_rehearsal_test.sh runs it,
# so a GPU session's device time goes to measuring, not to typos.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, compute-sanitizer, ncu where the toolkit keeps them
# Phases write under $res; what goes back is $out (the device tool's $OUT
# returns at most 8 files): after every phase, all summaries so far in
# $out/summary.txt and everything in $out/gpu-check.tar.gz, so a call cut
# off at its limit still returns the phases before.
out=${OUT:-gpu-results}
res=${GPU_CHECK_DIR:-/tmp/gpu-check}
build=${BUILD:-build-gpu}
arch=${CUDA_ARCH:-90}
limit=${PHASE_TIMEOUT:-480}
deadline=${DEADLINE:-}
rehearsal=${GPU_CHECK_REHEARSAL:-}
jobs=$(nproc)
mkdir -p "$res" "$out"
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(probe build test)
status=0

# summary PHASE TEXT...: the phase's summary, printed and put first in $res/PHASE.txt.
summary() {
  local phase=$1
  shift
  { printf '# %s  %s\n' "$phase" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"; printf '%s\n' "$@"; } >"$res/$phase.txt"
  [ -f "$res/$phase.log" ] && printf '\n(full log: %s.log)\n' "$phase" >>"$res/$phase.txt"
  cat "$res/$phase.txt"
}

# pack PHASE: after PHASE, the summaries of the phases run so far, in order, and a tarball of every file.
ran=()
pack() {
  ran+=("$1")
  for q in "${ran[@]}"; do [ -f "$res/$q.txt" ] && cat "$res/$q.txt" && echo; done >"$out/summary.txt"
  tar -czf "$out/gpu-check.tar.gz" -C "$res" . 2>/dev/null
}

configure() {
  # A build configured against the bundle needs its unpacked root/; a later device call that carries
  # .dev again replaces the folder and drops root/ (seen 2026-11-27), so configure again (which unpacks).
  local unpacked=1
  [ -n "${OFFLINE_BUNDLE:-}" ] && [ ! -f "$OFFLINE_BUNDLE/root/.unpacked" ] && unpacked=0
  [ -f "$build/build.ninja" ] && [ $unpacked -eq 1 ] && return 0
  local args=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch")
  if [ -n "${OFFLINE_BUNDLE:-}" ]; then
    TANDEM_CONFIGURE_ONLY=1 scripts/offline-build.sh "$OFFLINE_BUNDLE" "$build" "${args[@]}"
  else
    cmake -S . -B "$build" -G Ninja "${args[@]}"
  fi
}

# build_targets LOG TARGET...: configure if needed, then build those targets (a rehearsal uses the build as it is).
build_targets() {
  local log=$1
  shift
  [ -z "$rehearsal" ] || return 0
  configure >>"$log" 2>&1 && cmake --build "$build" -j"$jobs" --target "$@" >>"$log" 2>&1
}

# The GPU tests, as a ctest regex: tests whose body or fixture calls TANDEM_REQUIRE_GPU().
gpu_test_regex() {
  python3 - <<'PY'
import re, pathlib
names = set()
files = sorted(pathlib.Path("tests").rglob("*.cc")) + sorted(pathlib.Path("tests").rglob("*.h"))
sources = [f.read_text(errors="replace") for f in files]
# Fixtures whose SetUp requires a GPU, in any test source or header, and the fixtures derived from them
# (testing::GpuAttentionVariants in attention_testing.h has several).
fixtures = {m.group(1) for src in sources
            for m in re.finditer(r"class (\w+)\s*:[^{]*\{[^}]*?SetUp\(\)[^}]*TANDEM_REQUIRE_GPU", src, re.S)}
while True:
    derived = {m.group(1) for src in sources
               for m in re.finditer(r"class (\w+)\s*:\s*public\s+(?:[\w:]+::)?(\w+)", src) if m.group(2) in fixtures}
    if derived <= fixtures:
        break
    fixtures |= derived
# Macros that call it (attention_occupancy_test.cc's REQUIRE_SM90) mark a test as well.
markers = {"TANDEM_REQUIRE_GPU"} | {m.group(1) for src in sources
                                   for m in re.finditer(r"#define (\w+)\(\)[^\n]*\\\n(?:[^\n]*\\\n)*?[^\n]*TANDEM_REQUIRE_GPU", src)}
for src in sources:
    for m in re.finditer(r"TEST(?:_F|_P)?\((\w+),\s*(\w+)\)\s*\{([^}]*)", src):  # to the first "}": the check comes first
        if m.group(1) in fixtures or any(k in m.group(3) for k in markers):
            names.add(re.escape(m.group(1)) + r"\." + re.escape(m.group(2)))
print("(" + "|".join(sorted(names)) + ")" if names else "^$")
PY
}

# ctest_summary LOG: passed/failed/skipped counts, the failures and the skip reasons.
ctest_summary() {
  grep -E "tests passed|tests failed" "$1" | tail -1
  grep -E "\((Failed|SEGFAULT|Timeout|Subprocess aborted|Child aborted|Exception)\)" "$1" | sed 's/^/failed: /' | head -30
  grep -E "\(Skipped\)" "$1" | sed 's/^/skipped: /' | head -30
}

# capture NAME LIMIT CMD...: runs CMD under LIMIT seconds with its output in $res/NAME.txt, adds that
# to the calling phase's $log under a header, and counts a failure in its rc. Returns CMD's status.
capture() {
  local name=$1 limit=$2 r
  shift 2
  [ -z "$rehearsal" ] || { rehearse "$name" "$@"; return; }
  timeout "$limit" "$@" >"$res/$name.txt" 2>&1
  r=$?
  { echo "== $name: $*"; cat "$res/$name.txt"; } >>"$log"
  [ $r -eq 0 ] || rc=1
  return $r
}

# rehearse NAME CMD...: capture's part under GPU_CHECK_REHEARSAL (above): what CMD sets with a leading
# `env VAR=VALUE...` must be switches and values `tandem info` takes and prints, and CMD itself (from its
# first word under $build: ncu and its options are left out) must fail only for want of a GPU.
rehearse() {
  local name=$1 assigns=() problem="" info out r a
  shift
  if [ "$1" = env ]; then
    shift
    while [ $# -gt 0 ] && [[ $1 == *=* ]]; do assigns+=("$1"); shift; done
  fi
  if [ "$1" = python3 ]; then  # a Python script reading what ran (kernel_profile.py): nothing of Tandem's to check
    { echo "rehearsal: not rehearsed: $*"; } >"$res/$name.txt"
    echo "== $name (rehearsal): not rehearsed (python3)" >>"$log"
    return 0
  fi
  while [ $# -gt 0 ] && [[ $1 != "$build"/* ]]; do shift; done
  if [ $# -eq 0 ]; then
    problem="no command under $build to rehearse"
  else
    info=$(env "${assigns[@]}" "$build/apps/tandem" info 2>&1) || problem="tandem info refused the switches: $(grep -m1 'error:' <<<"$info" || tail -1 <<<"$info")"
    for a in "${assigns[@]}"; do
      grep -qw -- "$a" <<<"$info" || problem=${problem:-"$a: tandem info does not report this switch with this value (misspelt?)"}
    done
    out=$(env "${assigns[@]}" timeout 60 "$@" 2>&1)
    r=$?
    if [ $r -eq 0 ] || ! grep -Eq "no CUDA device is (available|present)" <<<"$out"; then
      problem=${problem:-"it did not stop at the missing GPU (exit $r): $(tail -3 <<<"$out" | tr '\n' ' ')"}
    fi
  fi
  { echo "rehearsal: ${assigns[*]} $*"; echo "${problem:-ok}"; } >"$res/$name.txt"
  { echo "== $name (rehearsal): ${problem:-ok}"; } >>"$log"
  [ -z "$problem" ] || { echo "rehearsal of $name: $problem" >&2; rc=1; return 1; }
}

phase_probe() {
  tools/gpu-probe.sh >"$res/probe.log" 2>&1
  summary probe "$(cat "$res/probe.log")"
}

phase_build() {
  local log="$res/build.log" t0=$SECONDS
  : >"$log"
  if configure >>"$log" 2>&1 && cmake --build "$build" -j"$jobs" >>"$log" 2>&1; then
    summary build "built in $((SECONDS - t0)) s ($jobs cores, sm_$arch)" "$("$build/apps/tandem" info 2>&1)"
  else
    summary build "BUILD FAILED after $((SECONDS - t0)) s" "$(grep -E -m30 "error|Error|FAILED" "$log")"
    return 1
  fi
}

# run_tests PHASE SELECT JOBS: builds every target, then runs the tests that ctest's SELECT (-R for
# the GPU tests, -E for the others) picks with gpu_test_regex, with TANDEM_REQUIRE_GPU=1.
run_tests() {
  local phase=$1 select=$2 j=$3 log="$res/$1.log" regex
  : >"$log"
  build_targets "$log" all || { summary "$phase" "build failed: see $phase.log" "$(grep -E -m20 "error|FAILED" "$log")"; return 1; }
  regex=$(gpu_test_regex)
  echo "== ctest $select <the GPU tests>, TANDEM_REQUIRE_GPU=1" >>"$log"
  TANDEM_REQUIRE_GPU=1 ctest --test-dir "$build" "$select" "$regex" --output-on-failure -j"$j" --timeout 300 >>"$log" 2>&1
  local r=$?
  summary "$phase" "$(ctest_summary "$log")"
  return $r
}

# The GPU tests at four at a time: they share the one GPU.
phase_test() { run_tests test -R 4; }
phase_others() { run_tests others -E "$jobs"; }

phase_sanitize() {
  local log="$res/sanitize.log" rc=0 regex lines=()
  : >"$log"
  build_targets "$log" kernels_tests ops_tests attention_tests optim_tests ||
    { summary sanitize "build failed: see sanitize.log"; return 1; }
  regex=$(gpu_test_regex)
  # gtest names a parameterized test Prefix/Suite.Test/param, so each Suite.Test from the
  # sources becomes four patterns (plain, typed or value-parameterized, both).
  local filter
  filter=$(sed -E 's/^\(|\)$//g; s/\\\././g' <<<"$regex" | tr '|' '\n' |
    sed -E 's#.*#&:*/&:&/*:*/&/*#' | paste -sd:)
  for tool in memcheck racecheck; do
    for t in kernels_tests ops_tests attention_tests optim_tests; do
      local tlog="$res/sanitize_${tool}_$t.log"
      TANDEM_REQUIRE_GPU=1 compute-sanitizer --tool "$tool" --error-exitcode 3 --print-limit 20 \
        "$build/tests/$t" --gtest_filter="$filter" >"$tlog" 2>&1
      local r=$?
      local errors
      errors=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$tlog" || echo "no summary (exit $r)")
      lines+=("$tool $t: exit $r; $errors; $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$tlog" | tr '\n' ' ')")
      [ $r -eq 0 ] || rc=1
    done
  done
  cat "$res"/sanitize_*.log >>"$log"
  summary sanitize "${lines[@]}"
  return $rc
}

phase_bench() {
  local log="$res/bench.log" rc=0 lines=() r b spec graph
  : >"$log"
  build_targets "$log" optim_bench kernels_bench attention_bench classifier_bench tandem ||
    { summary bench "build failed: see bench.log"; return 1; }
  for b in kernels_bench optim_bench attention_bench classifier_bench; do
    capture "bench_$b" 120 "$build/bench/$b" --device cuda
    r=$?
    lines+=("== $b (exit $r$([ $r -eq 124 ] && echo ', timed out at 120 s'))" "$(grep -E '^\|' "$res/bench_$b.txt" | head -40)")
  done
  # Attention, bf16: the first kernels (tiled forward, split backward: the bench's
  # defaults), the pipelined forward (the library's default) with the fused
  # backward, the wide pipelined forward (pipelined_wide: 32 query rows per warp,
  # two blocks per SM, against pipelined's 16 and four), split against fused with
  # dropout 0.1 (TANDEM_ATTENTION_BACKWARD=auto picks fused there on the strength
  # of one whole step: this checks it kernel by kernel), and the peer on the same
  # machine, cuDNN's fused attention (when built); then f32 with the split and the
  # fused backward; the split backward with both passes pipelined (split_pipelined, opt-in); and the
  # fused backward with its dQ shares added in place (fused_ordered, opt-in), bf16 with and without
  # dropout and f32, against the fused rows, and that with its query tiles double-buffered
  # (fused_ordered_pipelined, two blocks per SM).
  # The table names each column's kernel.
  # The forward's grid tiles first (TANDEM_ATTENTION_BLOCK_ORDER=tiles_first, opt-in: a head's query tiles
  # side by side, sharing its K and V in L2; the backward columns are the same kernels again), bf16, against the bf16 (tiled forward), bf16_split_pipelined (the
  # pipelined forward), bf16_wide and bf16_dropout_fused rows below (heads first). First, so that a cut phase
  # keeps them: at 64 x 512 x 12 x 64 the four-block forward's resident heads' K and V (69 MB) overflow L2
  # heads first.
  lines+=("== attention, bf16, grids tiles first (TANDEM_ATTENTION_BLOCK_ORDER=tiles_first)")
  for spec in "bf16:--forward tiled" "bf16_split_pipelined:--forward pipelined --backward split_pipelined" \
    "bf16_wide:--forward pipelined_wide" "bf16_dropout_fused:--forward pipelined --backward fused --dropout 0.1"; do
    # shellcheck disable=SC2086  # the options after the colon are words
    capture "bench_attention_${spec%%:*}_tiles_first" 120 env TANDEM_ATTENTION_BLOCK_ORDER=tiles_first \
      "$build/bench/attention_bench" --device cuda --dtype bf16 ${spec#*:}
    lines+=("$(cat "$res/bench_attention_${spec%%:*}_tiles_first.txt")")
  done
  # The fused backward's chunks by whole rounds of resident blocks (TANDEM_ATTENTION_FUSED_CHUNKS=waves,
  # opt-in), bf16 with dropout 0.1, against bf16_dropout_fused below (even chunks). Only 64 x 512 x 12 x 64's
  # chunks differ: 12 launches of 2 rounds even, 16 of one by waves; the other shapes' rows are the same
  # launches again (noise).
  lines+=("== attention, bf16, dropout 0.1, fused backward in chunks of whole rounds (TANDEM_ATTENTION_FUSED_CHUNKS=waves)")
  capture bench_attention_bf16_dropout_fused_waves 120 env TANDEM_ATTENTION_FUSED_CHUNKS=waves \
    "$build/bench/attention_bench" --device cuda --dtype bf16 --forward pipelined --backward fused --dropout 0.1
  lines+=("$(cat "$res/bench_attention_bf16_dropout_fused_waves.txt")")
  lines+=("== attention: Tandem's kernels vs cuDNN (bf16), split vs fused backward (bf16 with dropout, f32)")
  for spec in "bf16:--dtype bf16" "bf16_pipelined_fused:--dtype bf16 --forward pipelined --backward fused" \
    "bf16_wide:--dtype bf16 --forward pipelined_wide" \
    "bf16_dropout_split:--dtype bf16 --forward pipelined --dropout 0.1" \
    "bf16_dropout_fused:--dtype bf16 --forward pipelined --backward fused --dropout 0.1" \
    "bf16_dropout_split_pipelined:--dtype bf16 --forward pipelined --backward split_pipelined --dropout 0.1" \
    "bf16_split_pipelined:--dtype bf16 --forward pipelined --backward split_pipelined" \
    "bf16_fused_ordered:--dtype bf16 --forward pipelined --backward fused_ordered" \
    "bf16_dropout_fused_ordered:--dtype bf16 --forward pipelined --backward fused_ordered --dropout 0.1" \
    "bf16_fused_ordered_pipelined:--dtype bf16 --forward pipelined --backward fused_ordered_pipelined" \
    "bf16_dropout_fused_ordered_pipelined:--dtype bf16 --forward pipelined --backward fused_ordered_pipelined --dropout 0.1" \
    "cudnn:--dtype bf16 --backend cudnn" "f32:--dtype f32" "f32_fused:--dtype f32 --backward fused" \
    "f32_fused_ordered:--dtype f32 --backward fused_ordered"; do
    # shellcheck disable=SC2086  # the options after the colon are words
    capture "bench_attention_${spec%%:*}" 120 "$build/bench/attention_bench" --device cuda ${spec#*:}
    lines+=("$(cat "$res/bench_attention_${spec%%:*}.txt")")
  done
  # Saved dropout keep bits (TANDEM_ATTENTION_DROPOUT_KEEP=saved, opt-in: the forward writes them, the
  # backward reads them instead of computing Philox again), bf16 with dropout 0.1, against the
  # bf16_dropout_* rows above (the same kernels recomputing).
  lines+=("== attention, bf16, dropout 0.1, keep bits saved by the forward (TANDEM_ATTENTION_DROPOUT_KEEP=saved)")
  for spec in "split:split" "split_pipelined:split_pipelined" "fused:fused"; do
    capture "bench_attention_bf16_dropout_${spec%%:*}_saved" 120 env TANDEM_ATTENTION_DROPOUT_KEEP=saved \
      "$build/bench/attention_bench" --device cuda --dtype bf16 --forward pipelined --dropout 0.1 --backward "${spec#*:}"
    lines+=("$(cat "$res/bench_attention_bf16_dropout_${spec%%:*}_saved.txt")")
  done
  # Attention dropout's philox7x16 rule (TANDEM_ATTENTION_DROPOUT_RNG=philox7x16, opt-in: Philox4x32-7 with
  # 16 decisions per block, FlashAttention-2's generator), bf16 with dropout 0.1, against the bf16_dropout_*
  # and *_saved rows above (philox10x8); SDPA's dropout row is in the peers phase.
  lines+=("== attention, bf16, dropout 0.1, philox7x16 (TANDEM_ATTENTION_DROPOUT_RNG=philox7x16)")
  for spec in "split:split:recompute" "split_pipelined:split_pipelined:recompute" "fused:fused:recompute" \
    "split_pipelined_saved:split_pipelined:saved"; do
    local rest=${spec#*:}
    capture "bench_attention_bf16_dropout_${spec%%:*}_philox7" 120 env TANDEM_ATTENTION_DROPOUT_RNG=philox7x16 \
      TANDEM_ATTENTION_DROPOUT_KEEP="${rest#*:}" "$build/bench/attention_bench" --device cuda --dtype bf16 \
      --forward pipelined --dropout 0.1 --backward "${rest%%:*}"
    lines+=("$(cat "$res/bench_attention_bf16_dropout_${spec%%:*}_philox7.txt")")
  done
  # More blocks per SM at head dims up to 32 (TANDEM_ATTENTION_OCCUPANCY=high, opt-in: the pipelined forward
  # at five, split_pipelined's passes at three; the fwd_blk/SM and bwd_blk/SM columns show them), bf16, against
  # bf16_split_pipelined, bf16_dropout_fused and bf16_dropout_split_pipelined_saved above. Only the
  # 8 x 512 x 16 x 32 row runs other kernels; the other shapes' rows are the same kernels again (noise).
  lines+=("== attention, bf16, TANDEM_ATTENTION_OCCUPANCY=high (head dim 32 only: more blocks per SM)")
  for spec in "split_pipelined:split_pipelined:0:recompute" "dropout_fused:fused:0.1:recompute" \
    "dropout_split_pipelined_saved:split_pipelined:0.1:saved"; do
    local rest=${spec#*:} dropout keep
    dropout=${rest#*:}; keep=${dropout#*:}; dropout=${dropout%%:*}
    capture "bench_attention_bf16_${spec%%:*}_high" 120 env TANDEM_ATTENTION_OCCUPANCY=high \
      TANDEM_ATTENTION_DROPOUT_KEEP="$keep" "$build/bench/attention_bench" --device cuda --dtype bf16 \
      --forward pipelined --dropout "$dropout" --backward "${rest%%:*}"
    lines+=("$(cat "$res/bench_attention_bf16_${spec%%:*}_high.txt")")
  done
  # Padded batches (every row's first quarter real, as AG News texts padded to 256 tokens): every key
  # tile against trimmed key tiles (TANDEM_ATTENTION_KEY_TILES=trimmed, opt-in), without and with
  # dropout (split and fused backward), and cuDNN (which takes the lengths); PyTorch's SDPA with the
  # same mask is in the peers phase.
  lines+=("== attention, bf16, 25 % of each row real: every key tile, trimmed, cuDNN")
  # (--forward pipelined is Tandem's own kernel: cuDNN's row takes none; 2026-11-28 it was refused.)
  for spec in "padded_all:all:--forward pipelined" "padded_trimmed:trimmed:--forward pipelined" \
    "padded_dropout_all:all:--forward pipelined --dropout 0.1" \
    "padded_dropout_trimmed:trimmed:--forward pipelined --dropout 0.1" "padded_cudnn:all:--backend cudnn"; do
    local rest=${spec#*:}
    # shellcheck disable=SC2086  # the options after the second colon are words
    capture "bench_attention_${spec%%:*}" 120 env TANDEM_ATTENTION_KEY_TILES="${rest%%:*}" \
      "$build/bench/attention_bench" --device cuda --dtype bf16 --real-fraction 0.25 ${rest#*:}
    lines+=("$(cat "$res/bench_attention_${spec%%:*}.txt")")
  done
  # The memory-bound ops at configs/ag_news_optimized.yaml's training shape (128 x 256 tokens of 256:
  # a row is one warp of 16-bit vectors), where the column-sum slots and the one-warp layer norm of
  # 2026-11-27 (docs/device.md) matter most.
  # Its bias_gelu_dropout_* and bias_dropout_add_layer_norm_* rows (separate, fused) time
  # TANDEM_GELU_DROPOUT's and TANDEM_ADD_LAYER_NORM's two choices side by side.
  capture bench_kernels_training 120 "$build/bench/kernels_bench" --device cuda --rows 32768 --d-model 256
  lines+=("== kernels_bench at ag_news_optimized's shape (32768 x 256)" \
    "$(grep -E '^\| *cuda' "$res/bench_kernels_training.txt" | grep -v ' linear ')")
  # The opt-in row kernels (kernels/cuda/row_kernel_switches.h) at both shapes, against the rows above:
  # TANDEM_LAYER_NORM=multi_row (several rows per group / in flight), TANDEM_MASKED_MEAN=lane_groups
  # (the sequence's 16 lanes dealt to up to 16 blocks), TANDEM_DROPOUT_BACKWARD=batched (four rows per
  # thread with no bias gradient, the walk before flat became the default: the dropout rows' backward) and
  # TANDEM_EMBEDDING_BACKWARD=pieces (the walk before windows became the default; its rows with 85 % id 0
  # time a padding id's long segment).
  for spec in "rows_16384:" "rows_32768:--rows 32768 --d-model 256"; do
    # shellcheck disable=SC2086  # the options after the colon are words
    capture "bench_kernels_${spec%%:*}_opt_in" 120 env TANDEM_LAYER_NORM=multi_row TANDEM_MASKED_MEAN=lane_groups \
      TANDEM_DROPOUT_BACKWARD=batched TANDEM_EMBEDDING_BACKWARD=pieces "$build/bench/kernels_bench" --device cuda ${spec#*:}
    lines+=("== kernels_bench ${spec#*:}, the opt-in row kernels (multi_row, lane_groups; batched, pieces)" \
      "$(grep -E '^\| *cuda *\| *(layer_norm|masked_mean_pool|dropout|embedding) ' "$res/bench_kernels_${spec%%:*}_opt_in.txt")")
  done
  # A block per column-sum slot instead of a thread (group) at the training shape, where the second run
  # measured 17 % (layer_norm backward) and 27 % (bias_dropout_add backward) of copy:
  # TANDEM_LAYER_NORM=lanes and TANDEM_COLUMN_SUM=block (bias_gelu, bias_dropout_add, linear's bias; the
  # fused residual + layer norm's backward takes the lanes walk, the fused GELU + dropout's the block walk).
  capture bench_kernels_rows_32768_block_slots 120 env TANDEM_LAYER_NORM=lanes TANDEM_COLUMN_SUM=block \
    "$build/bench/kernels_bench" --device cuda --rows 32768 --d-model 256
  lines+=("== kernels_bench --rows 32768 --d-model 256, TANDEM_LAYER_NORM=lanes TANDEM_COLUMN_SUM=block" \
    "$(grep -E '^\| *cuda *\| *(layer_norm|bias_gelu_tanh|bias_gelu_dropout_fused|bias_dropout_add|bias_dropout_add_layer_norm_fused|linear) ' \
      "$res/bench_kernels_rows_32768_block_slots.txt")")
  # The deferred biases' gradients in their linears (TANDEM_BIAS_GRADIENT=gemm, kernels/bias_gradient.h):
  # the GELU + dropout backward without a bias gradient takes the rows walk (its _no_db rows; the default
  # run above has the column walk storing no sums), against bias_gelu_dropout_fused's backward with the
  # sums; linear_db_in_gemm (above) against linear's backward is what the sum costs dw's GEMM.
  capture bench_kernels_rows_32768_bias_gemm 120 env TANDEM_BIAS_GRADIENT=gemm \
    "$build/bench/kernels_bench" --device cuda --rows 32768 --d-model 256
  lines+=("== kernels_bench --rows 32768 --d-model 256, TANDEM_BIAS_GRADIENT=gemm" \
    "$(grep -E '^\| *cuda *\| *bias_gelu_dropout_fused(_saved)?(_no_db)? ' "$res/bench_kernels_rows_32768_bias_gemm.txt")")
  # linear again with both cuBLASLt epilogues (TANDEM_CUBLASLT_EPILOGUES=1: bias and bias gradient)
  # and with neither (0); the default, above, has the forward's bias epilogue only.
  for lt in 1 0; do
    capture "bench_kernels_lt$lt" 120 env TANDEM_CUBLASLT_EPILOGUES=$lt "$build/bench/kernels_bench" --device cuda
    lines+=("== kernels_bench, TANDEM_CUBLASLT_EPILOGUES=$lt" "$(grep -E '^\| *cuda *\| *linear' "$res/bench_kernels_lt$lt.txt")")
  done
  capture bench_allreduce_nccl 60 "$build/apps/tandem" bench allreduce --backend nccl --device cuda
  # One CUDA graph per step (cuda_graph) against eager steps, same config and data.
  for graph in false true; do
    capture "bench_step_graph_$graph" 120 "$build/apps/tandem" bench step --config configs/fortunes_demo.yaml \
      --synthetic --precisions fp32,bf16 --warmup 5 --steps 30 --set device=cuda --set cuda_graph=$graph \
      --out "$res/bench_step_graph_$graph"
    r=$?
    lines+=("== bench step cuda_graph=$graph (exit $r)" "$(grep -E '^# precision|^ +(fp32|bf16) ' "$res/bench_step_graph_$graph.txt")")
  done
  # The parameters' casts in one launch (TANDEM_PARAMETER_CASTS=batched, kernels/parameter_casts.h) in the
  # launch-bound graph step above: against bench_step_graph_true, what 18 cast launches cost it.
  capture bench_step_graph_batched_casts 120 env TANDEM_PARAMETER_CASTS=batched "$build/apps/tandem" bench step \
    --config configs/fortunes_demo.yaml --synthetic --precisions bf16 --warmup 5 --steps 30 --set device=cuda \
    --set cuda_graph=true --out "$res/bench_step_graph_batched_casts"
  lines+=("== bench step cuda_graph=true, TANDEM_PARAMETER_CASTS=batched (exit $?)" \
    "$(grep -E '^# precision|^ +bf16 ' "$res/bench_step_graph_batched_casts.txt")")
  # A whole step on padded batches (about 25 % of each row real, as AG News padded to 256 tokens), every
  # attention key tile against trimmed ones (TANDEM_ATTENTION_KEY_TILES, opt-in), eager and with the graph.
  for tiles in all trimmed; do
    for graph in false true; do
      capture "bench_step_padded_${tiles}_graph_$graph" 120 env TANDEM_ATTENTION_KEY_TILES=$tiles \
        "$build/apps/tandem" bench step --config configs/ag_news_optimized.yaml --synthetic \
        --synthetic-real-fraction 0.25 --precisions bf16 --warmup 5 --steps 20 --rounds 1 --set device=cuda \
        --set cuda_graph=$graph --set ddp_static_graph=false --out "$res/bench_step_padded_${tiles}_graph_$graph"
      r=$?
      lines+=("== bench step ag_news_optimized, 25 % real, key tiles $tiles, cuda_graph=$graph (exit $r)" \
        "$(grep -E '^# precision|^ +bf16 ' "$res/bench_step_padded_${tiles}_graph_$graph.txt")")
    done
  done
  # The same padded rows cut to each batch's longest (data.padding longest, in steps of 32: 8 lengths,
  # a graph each) and grouped by length: the whole step on the real length instead of 256. Rows of
  # 1-127 tokens make 4 lengths; megabatches of 8 batches (4096 / (4 x 128)) show them all within the
  # 12 warm-up steps, so no capture falls among the timed steps.
  for graph in false true; do
    capture "bench_step_padded_longest_graph_$graph" 120 "$build/apps/tandem" bench step \
      --config configs/ag_news_optimized.yaml --synthetic --synthetic-real-fraction 0.25 --precisions bf16 \
      --warmup 12 --steps 20 --rounds 1 --set device=cuda --set cuda_graph=$graph --set ddp_static_graph=false \
      --set data.padding=longest --set data.pad_to_multiple_of=32 --set group_by_length=true \
      --out "$res/bench_step_padded_longest_graph_$graph"
    r=$?
    lines+=("== bench step ag_news_optimized, 25 % real, longest/32 grouped by length, cuda_graph=$graph (exit $r)" \
      "$(grep -E '^# precision|^ +bf16 ' "$res/bench_step_padded_longest_graph_$graph.txt")")
  done
  # Where ag_news_optimized's step goes, op by op (CUDA events per op, no ncu: ~15 s): issue #15's
  # 1.2x torch.compile goal is about this step, and kprofile (which would also run it) comes last
  # and may be cut. kprofile skips a config whose table this phase already wrote.
  capture ops_ag_news_optimized 120 "$build/apps/tandem" bench ops --config configs/ag_news_optimized.yaml \
    --synthetic --precision bf16 --warmup 3 --steps 10 --set device=cuda --out "$res/ops_ag_news_optimized"
  r=$?
  lines+=("== ag_news_optimized, bf16: tandem bench ops (exit $r)" "$(cat "$res/ops_ag_news_optimized.txt")")
  # Two ranks sharing the GPU (NCCL refuses two ranks on one device; the ring stages through pinned host memory).
  capture bench_step_two_ranks_ring 120 "$build/apps/tandem" bench step --config configs/fortunes_demo.yaml \
    --synthetic --nproc 2 --precisions fp32 --warmup 3 --steps 20 --set device=cuda --set ddp_backend=ring \
    --out "$res/bench_step_two_ranks_ring"
  r=$?
  lines+=("== bench step, 2 ranks on one GPU over the ring (exit $r)" \
    "$(grep -E '^# precision|^ +fp32 ' "$res/bench_step_two_ranks_ring.txt")")
  summary bench "${lines[@]}"
  return $rc
}

# variant_envs VARIANT: sets `envs` to the switches of one of phase_compare's eager variants (none for
# default).
variant_envs() {
  envs=()
  case $1 in
    winners) envs=("${winners[@]}") ;;
    first) envs=(TANDEM_ATTENTION_FORWARD=tiled TANDEM_ATTENTION_BACKWARD=split TANDEM_CUBLASLT_EPILOGUES=0) ;;
    wide) envs=(TANDEM_ATTENTION_FORWARD=pipelined_wide) ;;
    lt_all) envs=(TANDEM_CUBLASLT_EPILOGUES=1) ;;
    split) envs=(TANDEM_ATTENTION_BACKWARD=split) ;;
    split_pipelined) envs=(TANDEM_ATTENTION_BACKWARD=split_pipelined) ;;
    fused_ordered) envs=(TANDEM_ATTENTION_BACKWARD=fused_ordered) ;;
    fused_ordered_pipelined) envs=(TANDEM_ATTENTION_BACKWARD=fused_ordered_pipelined) ;;
    saved) envs=(TANDEM_ATTENTION_DROPOUT_KEEP=saved) ;;
    saved_split_pipelined) envs=(TANDEM_ATTENTION_DROPOUT_KEEP=saved TANDEM_ATTENTION_BACKWARD=split_pipelined) ;;
    philox7) envs=(TANDEM_ATTENTION_DROPOUT_RNG=philox7x16) ;;
    high_occupancy) envs=(TANDEM_ATTENTION_OCCUPANCY=high) ;;
    fused_waves) envs=(TANDEM_ATTENTION_FUSED_CHUNKS=waves) ;;
    separate) envs=(TANDEM_GELU_DROPOUT=separate TANDEM_ADD_LAYER_NORM=separate TANDEM_EMBEDDING_BACKWARD=pieces
                    TANDEM_DROPOUT_BACKWARD=batched) ;;
    rows) envs=(TANDEM_LAYER_NORM=multi_row TANDEM_MASKED_MEAN=lane_groups) ;;
    block_slots) envs=(TANDEM_LAYER_NORM=lanes TANDEM_COLUMN_SUM=block) ;;
    ffn_saved) envs=(TANDEM_DROPOUT_KEEP=saved) ;;
    bias_gemm) envs=(TANDEM_BIAS_GRADIENT=gemm) ;;
    batched_casts) envs=(TANDEM_PARAMETER_CASTS=batched) ;;
    master_grads) envs=(TANDEM_LINEAR_GRADIENTS=master) ;;
    combined) envs=(TANDEM_ATTENTION_DROPOUT_KEEP=saved TANDEM_ATTENTION_BACKWARD=split_pipelined TANDEM_ATTENTION_DROPOUT_RNG=philox7x16
                    TANDEM_ATTENTION_OCCUPANCY=high
                    TANDEM_DROPOUT_KEEP=saved TANDEM_LAYER_NORM=lanes TANDEM_COLUMN_SUM=block
                    TANDEM_BIAS_GRADIENT=gemm TANDEM_PARAMETER_CASTS=batched TANDEM_LINEAR_GRADIENTS=master) ;;
  esac
}

# variant_rate CONFIG VARIANT: the bf16 samples/s of that eager variant's step
# (compare_eager_CONFIG_VARIANT.txt); nothing where it has none (a failed or rehearsed run).
variant_rate() {
  awk '/^ +bf16 /{ print $2; exit }' "$res/compare_eager_${1}_$2.txt" 2>/dev/null
}

# fastest_variant CONFIG VARIANT...: the variant with the most bf16 samples/s; default where none has
# a figure.
fastest_variant() {
  local c=$1 v best=default rate top=0
  shift
  for v in "$@"; do
    rate=$(variant_rate "$c" "$v")
    [ -n "$rate" ] && awk -v a="$rate" -v b="$top" 'BEGIN { exit !(a > b) }' && { best=$v; top=$rate; }
  done
  echo "$best"
}

# winners_envs CONFIG VARIANT...: sets `winners` to the switches of every variant whose eager step beat
# default's by at least 1 %, taken from the fastest first, so where two set the same switch the faster
# one's value stays (saved_split_pipelined after split keeps split's backward and adds the saved bits).
# None without default's figure. The first winner is the fastest variant, so `winners` holds more than
# its switches exactly where a second winner added some.
winners_envs() {
  local c=$1 v r a base
  shift
  winners=()
  base=$(variant_rate "$c" default)
  [ -n "$base" ] || return 0
  for v in $(for v in "$@"; do r=$(variant_rate "$c" "$v"); [ -n "$r" ] && echo "$r $v"; done |
             sort -rn | awk -v b="$base" '$1 >= 1.01 * b { print $2 }'); do
    variant_envs "$v"
    for a in "${envs[@]}"; do
      [[ " ${winners[*]} " == *" ${a%%=*}="* ]] || winners+=("$a")
    done
  done
}

# Issue #15's side by side: bf16 on one GPU, synthetic data of each config's shape, Tandem with one
# CUDA graph per step (static_graph off: a graph step refuses it) against PyTorch eager and
# torch.compile; then Tandem's eager steps on the same configs, so the graph's share is visible.
phase_compare() {
  local log="$res/compare.log" args=() rc=0
  : >"$log"
  build_targets "$log" tandem || { summary compare "build failed: see compare.log"; return 1; }
  for c in ${COMPARE_CONFIGS:-ag_news_small ag_news_optimized}; do
    args+=(--config "configs/$c.yaml" --synthetic "$c")
  done
  local sets=(--set bf16=true --set device=cuda)
  if [ -n "$rehearsal" ]; then
    echo "compare.py: not run (rehearsal)" >>"$log"
  else
    python3 bench/pytorch/compare.py "${args[@]}" "${sets[@]}" --set cuda_graph=true --set ddp_static_graph=false \
      --nproc 1 --tandem "$build/apps/tandem" --out "$res/compare" >>"$log" 2>&1 || rc=1
  fi
  # Eager steps with the default kernels (chosen from the second GPU run: the pipelined attention
  # forward, the fused backward with dropout, cuBLASLt's forward bias epilogue), with the first
  # run's defaults (tiled forward, split backward, no epilogues), and, on the configs bound by
  # their kernels rather than by launches (not ag_news_small), with each remaining alternative
  # alone: the wide pipelined forward, both epilogues, the split backward, the split backward with
  # both passes pipelined, the fused backward's ordered dQ, the dropout keep bits saved by the forward
  # (with the default backward and with split_pipelined), the fused GELU + dropout's saved keep
  # bits, the deferred biases' gradients in their linears' GEMMs (bias_gemm), the parameters' casts in
  # one launch (batched_casts, at ag_news_small's launch-bound shape too), the weights' gradients
  # written in f32 by their backward (master_grads: 22 cast backwards fewer a step), attention dropout's
  # philox7x16 rule (philox7: a Philox4x32-7 block per 16 decisions), more attention blocks per SM at
  # head dim 32 (high_occupancy: the forward at five; the backward is fused, unchanged), the fused backward's
  # chunks by whole rounds of resident blocks (fused_waves: 11 rounds a layer instead of 12), the opt-in row kernels
  # (with the fused GELU + dropout and bias + dropout + residual + layer
  # norm, whose kernels_bench rows, bias_gelu_dropout_* and bias_dropout_add_layer_norm_*, are in the
  # bench phase), and `combined`: every opt-in that its kernels_bench or attention_bench rows may
  # favour at once (saved keep bits both kinds, split_pipelined, philox7x16, high occupancy, bias_gemm, batched_casts,
  # master_grads, lanes and the block walk).
  local eager=() graph=() envs=() winners=() variant variants fastest_set winners_set
  for c in ${COMPARE_CONFIGS:-ag_news_small ag_news_optimized}; do
    variants="default combined first separate wide lt_all split split_pipelined fused_ordered fused_ordered_pipelined saved saved_split_pipelined philox7 high_occupancy fused_waves ffn_saved bias_gemm batched_casts master_grads rows block_slots"
    # Only ag_news_optimized, bound by its kernels, gets every alternative; another config (ag_news_small,
    # launch-bound; imdb when COMPARE_CONFIGS names it) the defaults, the first ones and the batched casts.
    [ "$c" = ag_news_optimized ] || variants="default first batched_casts"
    for variant in $variants; do
      # The graph step below is the one the goals are read from: keep its time (about 15 s, capped at
      # 120) rather than run every eager variant into the phase's limit.
      if [ $((phase_end - $(date +%s))) -lt 60 ]; then
        eager+=("$c: the eager variants from $variant on not run (under 60 s of the phase left)")
        break
      fi
      variant_envs "$variant"
      capture "compare_eager_${c}_$variant" 120 env "${envs[@]}" "$build/apps/tandem" bench step \
        --config "configs/$c.yaml" --synthetic --precisions bf16 --warmup 5 --steps 30 --rounds 2 --set device=cuda \
        --out "$res/compare_eager_${c}_$variant"
      eager+=("$c, $variant kernels: $(grep -E '^ +bf16' "$res/compare_eager_${c}_$variant.txt")")
    done
    # The switches of every variant that beat default, together (winners_envs), where two or more did:
    # the combination the fastest single variant may leave on the table.
    # Not where the fastest variant already sets them all (`combined` often does).
    winners_envs "$c" $variants
    variant_envs "$(fastest_variant "$c" $variants)"
    fastest_set=$(printf '%s\n' "${envs[@]}" | sort | tr '\n' ' ')
    winners_set=$(printf '%s\n' "${winners[@]}" | sort | tr '\n' ' ')
    if [ ${#winners[@]} -gt 0 ] && [ "$winners_set" != "$fastest_set" ] && [ $((phase_end - $(date +%s))) -ge 60 ]; then
      variant_envs winners
      echo "${envs[*]}" >"$res/compare_eager_${c}_winners.envs"
      capture "compare_eager_${c}_winners" 120 env "${envs[@]}" "$build/apps/tandem" bench step \
        --config "configs/$c.yaml" --synthetic --precisions bf16 --warmup 5 --steps 30 --rounds 2 --set device=cuda \
        --out "$res/compare_eager_${c}_winners"
      eager+=("$c, winners (${envs[*]}): $(grep -E '^ +bf16' "$res/compare_eager_${c}_winners.txt")")
      variants="$variants winners"
    fi
    # The fastest eager variant again, as one CUDA graph per step: the step goals are the graph
    # step's, and compare.py above runs it with the default kernels only, so this is the step that
    # variant's switches as defaults would give, in the same run as PyTorch's (tools/gpu_goals.py).
    # Where default is the fastest, it repeats compare.py's Tandem row: a measure of the noise.
    variant=$(fastest_variant "$c" $variants)
    variant_envs "$variant"
    echo "$variant${envs[*]:+: ${envs[*]}}" >"$res/compare_graph_${c}_fastest.variant"
    capture "compare_graph_${c}_fastest" 120 env "${envs[@]}" "$build/apps/tandem" bench step \
      --config "configs/$c.yaml" --synthetic --precisions bf16 --warmup 5 --steps 30 --rounds 2 --set device=cuda \
      --set cuda_graph=true --set ddp_static_graph=false --out "$res/compare_graph_${c}_fastest"
    graph+=("$c, the fastest eager variant ($variant) as a graph step: $(grep -E '^ +bf16' "$res/compare_graph_${c}_fastest.txt")")
  done
  summary compare "status $rc (compare.py with Tandem's cuda_graph: true, then Tandem's eager steps)" "$(cat "$res/compare/compare.md" 2>/dev/null || tail -20 "$log")" \
    "" "Tandem's eager steps (samples/s, step ms, p10-p90, forward, backward, optimizer ms, peak MiB);" \
    "first = TANDEM_ATTENTION_FORWARD=tiled TANDEM_ATTENTION_BACKWARD=split TANDEM_CUBLASLT_EPILOGUES=0;" \
    "wide = TANDEM_ATTENTION_FORWARD=pipelined_wide; lt_all = TANDEM_CUBLASLT_EPILOGUES=1;" \
    "split = TANDEM_ATTENTION_BACKWARD=split; split_pipelined = TANDEM_ATTENTION_BACKWARD=split_pipelined;" \
    "fused_ordered(_pipelined) = TANDEM_ATTENTION_BACKWARD=fused_ordered(_pipelined);" \
    "saved = TANDEM_ATTENTION_DROPOUT_KEEP=saved; saved_split_pipelined = that and TANDEM_ATTENTION_BACKWARD=split_pipelined;" \
    "separate = TANDEM_GELU_DROPOUT=separate TANDEM_ADD_LAYER_NORM=separate TANDEM_EMBEDDING_BACKWARD=pieces" \
    "  TANDEM_DROPOUT_BACKWARD=batched (the row defaults before 2026-11-28);" \
    "rows = TANDEM_LAYER_NORM=multi_row TANDEM_MASKED_MEAN=lane_groups;" \
    "ffn_saved = TANDEM_DROPOUT_KEEP=saved; block_slots = TANDEM_LAYER_NORM=lanes TANDEM_COLUMN_SUM=block;" \
    "bias_gemm = TANDEM_BIAS_GRADIENT=gemm; batched_casts = TANDEM_PARAMETER_CASTS=batched;" \
    "master_grads = TANDEM_LINEAR_GRADIENTS=master; philox7 = TANDEM_ATTENTION_DROPOUT_RNG=philox7x16;" \
    "high_occupancy = TANDEM_ATTENTION_OCCUPANCY=high; fused_waves = TANDEM_ATTENTION_FUSED_CHUNKS=waves;" \
    "combined = saved_split_pipelined's, philox7's, high_occupancy's, ffn_saved's, bias_gemm's, batched_casts', master_grads' and block_slots' together:" \
    "${eager[@]}" "" "${graph[@]}"
  return $rc
}

# Where the GPU time of a training step goes, kernel by kernel: Nsight Compute times every kernel
# of a short eager run (serialised, one metric, clocks left alone) and tools/kernel_profile.py sums
# them by kernel name. The configs of issue #15's unmet goals by default (KPROFILE_CONFIGS).
phase_kprofile() {
  local log="$res/kprofile.log" rc=0 lines=() r c
  : >"$log"
  build_targets "$log" tandem || { summary kprofile "build failed: see kprofile.log"; return 1; }
  [ -n "$rehearsal" ] || command -v ncu >/dev/null || { summary kprofile "ncu is not on the PATH"; return 1; }
  for c in ${KPROFILE_CONFIGS:-ag_news_optimized imdb}; do
    capture "kprofile_run_$c" 200 ncu --clock-control none --target-processes all --metrics gpu__time_duration.sum \
      --csv --log-file "$res/kprofile_$c.csv" "$build/apps/tandem" bench step --config "configs/$c.yaml" \
      --synthetic --precisions bf16 --warmup 1 --steps 2 --rounds 1 --set device=cuda --out "$res/kprofile_step_$c"
    r=$?
    capture "kprofile_$c" 60 python3 tools/kernel_profile.py "$res/kprofile_$c.csv" --top 25 \
      --json "$res/kprofile_$c.json" || r=1
    lines+=("== $c, bf16, 3 eager steps and set-up: GPU time by kernel (ncu exit $r)" "$(cat "$res/kprofile_$c.txt")")
    # Tandem's own op table (CUDA events per op), without ncu: the same steps by op instead of by kernel
    # (the bench phase may have written it already).
    [ -s "$res/ops_$c.txt" ] && { lines+=("== $c, bf16: tandem bench ops: in bench.txt"); continue; }
    capture "ops_$c" 120 "$build/apps/tandem" bench ops --config "configs/$c.yaml" --synthetic --precision bf16 \
      --warmup 3 --steps 10 --set device=cuda --out "$res/ops_$c"
    r=$?
    lines+=("== $c, bf16: tandem bench ops (exit $r)" "$(cat "$res/ops_$c.txt")")
  done
  summary kprofile "${lines[@]}"
  return $rc
}

# Why attention is slow (issue #15: 2.1x PyTorch SDPA's time in the second run): Nsight Compute's
# speed of light, occupancy, launch, memory, warp-state (what the warps wait on), compute-workload
# (pipe use), instruction and source-counter (warp stalls sampled by SASS line, shared-memory bank
# conflicts; docs/results/attention_vs_flashattention2_sass.md says why) sections for the attention
# kernels of one bf16 shape (8 x 512 x 12 x 64):
# the library's default (pipelined forward, split backward), the split backward with both passes
# pipelined, and the wide forward with the fused backward: the forward kernel of the second call
# (after the warm-up call) and the three backward kernels of the second backward call (rowdot,
# dK/dV, dQ; or rowdot, the fused kernel and the dQ reduction).
phase_kdetail() {
  local log="$res/kdetail.log" rc=0 lines=() r spec
  : >"$log"
  build_targets "$log" attention_bench || { summary kdetail "build failed: see kdetail.log"; return 1; }
  [ -n "$rehearsal" ] || command -v ncu >/dev/null || { summary kdetail "ncu is not on the PATH"; return 1; }
  local sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis
    --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters)
  local keep='^  [A-Za-z_].*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per Thread|Dynamic Shared Memory Per Block|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|stalled|Stall|[Bb]ank|[Ww]avefronts|Uncoalesced'
  # pass forward-kernel backward-path shape dropout keep, in the order of what matters most if the phase
  # is cut: the default 16-bit backward without dropout; the configs' case, head dim 32 with dropout
  # 0.1, with the keep bits recomputed and saved (TANDEM_ATTENTION_DROPOUT_KEEP), whose difference is
  # the Philox work; the new pipelined ordered fused one, the default forward, then the rest.
  # (A fused_ordered call has two backward kernels, rowdot and the fused one, so its three profiled
  # kernels are the second call's fused kernel and the third call's two.)
  for spec in "backward pipelined split 8,512,12,64 0 recompute" \
    "backward pipelined split 8,512,16,32 0.1 recompute" "backward pipelined split 8,512,16,32 0.1 saved" \
    "backward pipelined fused_ordered_pipelined 8,512,12,64 0 recompute" "forward pipelined split 8,512,12,64 0 recompute" \
    "backward pipelined fused_ordered 8,512,12,64 0 recompute" "backward pipelined fused 8,512,12,64 0 recompute" \
    "backward pipelined split_pipelined 8,512,12,64 0 recompute" "forward pipelined_wide split 8,512,12,64 0 recompute"; do
    # shellcheck disable=SC2086  # words
    set -- $spec
    local kernels="regex:forward" skip=1 count=1 name="kdetail_$1_$2_$3"
    [ "$1" = backward ] && kernels="regex:rowdot|dkdv|dq_|fused_backward" skip=3 count=3
    [ "$5" != 0 ] && name="${name}_${4//,/x}_dropout_$6"
    capture "$name" 100 env TANDEM_ATTENTION_DROPOUT_KEEP="$6" ncu --clock-control none "${sections[@]}" \
      --kernel-name "$kernels" --launch-skip "$skip" \
      --launch-count "$count" "$build/bench/attention_bench" --device cuda --dtype bf16 --shape "$4" \
      --min-seconds 0.01 --forward "$2" --backward "$3" --dropout "$5"
    r=$?
    lines+=("== attention bf16 ${4//,/x}, dropout $5 (keep bits: $6), forward $2, backward $3: the $1 kernels (ncu exit $r)"
      "$(grep -E "$keep" "$res/$name.txt" | cut -c1-400)")
  done
  # The fused GELU + dropout backward at ag_news_optimized's FFN shape (32768 x 1024 bf16), 40 % of
  # copy in the third run's kernels_bench against 90 % for GELU's backward alone: where its time goes
  # (the bias gradient's column sums, the Philox blocks of the mask, or the loads).
  build_targets "$log" kernels_bench || { summary kdetail "${lines[@]}" "kernels_bench: build failed"; return 1; }
  capture kdetail_bias_gelu_dropout_backward 100 ncu --clock-control none "${sections[@]}" \
    --kernel-name-base demangled --kernel-name 'regex:bias_gelu_dropout_backward_kernel<tandem::BFloat16' \
    --launch-skip 5 --launch-count 1 \
    "$build/bench/kernels_bench" --device cuda --rows 32768 --d-model 256 --reps 10
  r=$?
  lines+=("== bias_gelu_dropout backward, bf16 32768 x 1024 (kernels_bench; ncu exit $r)"
    "$(grep -E "$keep" "$res/kdetail_bias_gelu_dropout_backward.txt" | cut -c1-400)")
  summary kdetail "${lines[@]}"
  return $rc
}

# The PyTorch halves of the kernel, attention and optimizer benchmarks, on the same GPU, each
# under a timeout: the peer numbers for the bench phase's tables.
phase_peers() {
  local log="$res/peers.log" rc=0 lines=() r b
  : >"$log"
  # name:script and arguments; ops_training is kernels_bench's second run (ag_news_optimized's shape).
  for b in "attention:attention_bench.py --device cuda --dtype bf16" \
    "attention_dropout:attention_bench.py --device cuda --dtype bf16 --dropout 0.1" \
    "attention_padded:attention_bench.py --device cuda --dtype bf16 --real-fraction 0.25" \
    "ops:ops_bench.py --device cuda" \
    "ops_training:ops_bench.py --device cuda --rows 32768 --d-model 256" "optim:optim_bench.py --device cuda"; do
    # shellcheck disable=SC2086  # the part after the colon is the script and its arguments
    capture "peers_${b%%:*}" 150 python3 bench/pytorch/${b#*:}
    r=$?
    lines+=("== PyTorch ${b%%:*} (exit $r)" "$(grep -vE '^(Warning|/)' "$res/peers_${b%%:*}.txt" | head -40)")
  done
  summary peers "${lines[@]}"
  return $rc
}

for p in "${phases[@]}"; do
  if ! declare -F "phase_$p" >/dev/null; then
    echo "gpu-check: unknown phase '$p' (probe build test others sanitize bench compare peers kprofile kdetail)" >&2
    exit 2
  fi
done
if [ -n "$rehearsal" ]; then
  [ -x "$build/apps/tandem" ] ||
    { echo "gpu-check: GPU_CHECK_REHEARSAL uses the build as it is, and $build/apps/tandem is missing: build first" >&2; exit 2; }
  if "$build/apps/tandem" info 2>/dev/null | grep -Eq '^cuda devices: [1-9]'; then
    echo "gpu-check: GPU_CHECK_REHEARSAL is for a machine without a GPU; this one has one: run the phases" >&2
    exit 2
  fi
fi
for p in "${phases[@]}"; do
  phase_limit=$limit
  if [ -n "$deadline" ]; then
    left=$((deadline - SECONDS))
    [ "$left" -lt "$phase_limit" ] && phase_limit=$left
    if [ "$phase_limit" -lt 10 ]; then
      summary "$p" "not run: ${left} s of DEADLINE=${deadline} left"
      status=1
      pack "$p"
      continue
    fi
  fi
  echo "==== phase $p (limit ${phase_limit} s)"
  # Each phase in its own shell under a time limit, so one that hangs cannot eat the next one's time.
  export -f summary configure build_targets gpu_test_regex ctest_summary capture rehearse run_tests variant_envs variant_rate \
    fastest_variant winners_envs "phase_$p"
  # phase_end (epoch seconds): when the phase's limit stops it, for a phase that keeps time for its last step.
  phase_end=$(($(date +%s) + phase_limit))
  export res build arch jobs rehearsal phase_end
  timeout "$phase_limit" bash -c "phase_$p"
  r=$?
  if [ $r -eq 124 ]; then
    echo "phase $p: stopped at its ${phase_limit} s limit" | tee -a "$res/$p.txt"
  fi
  [ $r -eq 0 ] || status=1
  pack "$p"
done
exit $status
