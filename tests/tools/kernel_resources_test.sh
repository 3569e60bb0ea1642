#!/usr/bin/env bash
# tools/kernel_resources.py on a fixture object (tests/tools/fixtures/local_memory_kernels.cu, built
# for sm_90): it lists the kernel with a stack frame, passes a budget that allows it, and fails, naming
# the kernel or the budget's line, on a frame over its allowance, an unlisted frame, a stale allowance
# and a malformed line, but only reports where the budget was read with another nvcc release; --json
# and --since (what a change did to the kernels' figures).
# Usage: kernel_resources_test.sh REPO_ROOT FIXTURE_OBJECT CUOBJDUMP
set -uo pipefail
root=$1 object=$2 cuobjdump=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
tool() { python3 "$root/tools/kernel_resources.py" --cuobjdump "$cuobjdump" "$object" "$@" >"$tmp/out" 2>"$tmp/err"; }
has() { grep -qF -- "$1" "$2"; }
exits() { local want=$1; shift; tool "$@"; [ $? = "$want" ]; }  # exits STATUS ARGS...: tool ARGS exits STATUS

tool --markdown "$tmp/table.md"
check "without a budget it lists and exits 0" $?
has "2 kernels in 1 files; 1 with a stack frame" "$tmp/out" && has "indexed_array(float*, int)" "$tmp/out"
check "the kernel with a stack frame is named, with its bytes" $?
! has "registers_only" "$tmp/out"; check "the kernel without one is not" $?
has '| `registers_only(float*)` | sm_90 |' "$tmp/table.md" && has '| `indexed_array(float*, int)` | sm_90 |' "$tmp/table.md"
check "the markdown table has every kernel" $?
frame=$(grep -o '[0-9]* bytes' "$tmp/out" | head -1 | cut -d' ' -f1)
[ "${frame:-0}" -ge 1024 ]; check "the frame holds the 256-float array ($frame bytes)" $?

printf '# allowances\n%s indexed_array  # the fixture indexes its array at run time\n' "$frame" >"$tmp/ok.txt"
tool --allow "$tmp/ok.txt"; check "a budget that allows the frame passes" $?

printf '%s indexed_array  # too small\n' $((frame - 1)) >"$tmp/small.txt"
exits 1 --allow "$tmp/small.txt" && has "indexed_array(float*, int) (sm_90, $(basename "$object")): a $frame-byte stack frame, $tmp/small.txt:1 allows $((frame - 1))" "$tmp/err"
check "a frame over its allowance fails, naming the kernel and the line" $?

: >"$tmp/empty.txt"
exits 1 --allow "$tmp/empty.txt" && has "indexed_array(float*, int)" "$tmp/err" && has "not in the budget" "$tmp/err"
check "an unlisted frame fails" $?

printf '%s indexed_array  # ok\n64 registers_only  # nothing to allow\n' "$frame" >"$tmp/stale.txt"
exits 1 --allow "$tmp/stale.txt" && has "$tmp/stale.txt:2: 'registers_only' matches no kernel with a stack frame" "$tmp/err"
check "an allowance that matches no frame fails, naming its line" $?

printf '# nvcc: 13.0\n' >"$tmp/release.txt"
exits 1 --allow "$tmp/release.txt" --nvcc 13.0.88 && has "not in the budget" "$tmp/err"; check "with the budget's nvcc release, an unlisted frame fails" $?
exits 0 --allow "$tmp/release.txt" --nvcc 13.1.5 && has "not in the budget" "$tmp/err" && has "was read with nvcc 13.0, these files were built by nvcc 13.1.5" "$tmp/out"
check "with another nvcc release, the differences are reported but do not fail" $?

printf '%s indexed_array\n' "$frame" >"$tmp/why.txt"
exits 2 --allow "$tmp/why.txt" && has "$tmp/why.txt:1: expected 'BYTES REGEX  # why'" "$tmp/err"
check "a line without its reason is refused with exit 2" $?

exits 2 --allow "$tmp/missing.txt" && has "$tmp/missing.txt: No such file or directory" "$tmp/err"
check "a missing budget file is refused, named" $?

# --json, then --since against an edited copy: the kernel whose figures moved, one added, one gone.
tool --json "$tmp/now.json"; check "--json writes the figures" $?
python3 - "$tmp/now.json" "$tmp/before.json" <<'PY'
import json, sys
kernels = json.load(open(sys.argv[1]))
for k in kernels:
    if k["name"].startswith("indexed_array"):
        k["reg"], k["stack"] = k["reg"] - 10, 0
kept = [k for k in kernels if not k["name"].startswith("registers_only")]
kept.append(dict(kept[0], mangled="_Z11retired_onev", name="retired_one()"))
json.dump(kept, open(sys.argv[2], "w"))
PY
exits 0 --since "$tmp/before.json" && has "since $tmp/before.json: 3 changes:" "$tmp/out" && has "stack 0 -> $frame: indexed_array(float*, int) (sm_90)" "$tmp/out" &&
  has "  new: registers_only(float*) (sm_90): registers" "$tmp/out" && has "  gone: retired_one() (sm_90)" "$tmp/out"
check "--since names each kernel whose figures moved, the new ones and the gone ones" $?
tool --since "$tmp/now.json"; has "since $tmp/now.json: 0 changes" "$tmp/out"; check "--since the same build: no changes" $?
echo "not json" >"$tmp/bad.json"
exits 2 --since "$tmp/bad.json" && has "$tmp/bad.json: not a --json file of this tool" "$tmp/err"; check "a --since file that is not --json's is refused" $?

python3 "$root/tools/kernel_resources.py" --cuobjdump "$cuobjdump" "$tmp/none.a" >/dev/null 2>"$tmp/err"; status=$?
[ "$status" = 2 ] && has "$tmp/none.a: no such file" "$tmp/err"
check "a missing library is refused, named" $?
finish
