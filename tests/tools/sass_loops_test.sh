#!/usr/bin/env bash
# tools/sass_loops.py on a synthetic cuobjdump listing: the main loop is the longest backward branch's
# body holding an HMMA (an HMMA-free loop after it does not count), its HMMAs are counted, and --mix
# lists the loops nested in it and its opcodes without predicates or modifiers.
# Usage: sass_loops_test.sh REPO_ROOT
set -uo pipefail
root=$1
tool="python3 $root/tools/sass_loops.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
# foo(float*): 0x10-0xc0 is the main loop (12 instructions, 3 HMMA), 0x20-0x60 a rolled inner loop
# (5, 2 HMMA) in it, 0xd0-0xe0 a loop without HMMA after it.
{
  printf '\n\tcode for sm_90\n\t\tFunction : _Z3fooPf\n\t.headerflags\t@"EF_CUDA_SM90"\n'
  i=0
  for ins in "MOV R1, c[0x0][0x28]" "CS2R R4, SRZ" "LDSM.16.M88.4 R8, [R2]" "HMMA.16816.F32.BF16 R4, R8, R12, R4" \
    "HMMA.16816.F32.BF16 R4, R8, R14, R4" "IMAD R2, R2, 0x2, RZ" "@!P0 BRA 0x20" "MUFU.EX2 R4, R4" \
    "@P1 FFMA R4, R4, R5, R6" "HMMA.16816.F32.BF16 R4, R8, R16, R4" "BAR.SYNC.DEFER_BLOCKING 0x0" \
    "ISETP.GE.AND P2, PT, R3, 0x4, PT" "@!P2 BRA 0x10" "IADD3 R3, R3, 0x1, RZ" "@!P2 BRA 0xd0" "EXIT"; do
    printf '        /*%04x*/                   %s ;    /* 0x000 */\n' $((i * 16)) "$ins"
    i=$((i + 1))
  done
  printf '\t\t..........\n'
} >"$tmp/fake.sass"

$tool "$tmp/fake.sass" >"$tmp/plain.txt" 2>&1
check "it exits 0" $?
grep -qx "foo: 16 total, main loop 12 (3 HMMA)" "$tmp/plain.txt"
check "the main loop is the longest loop holding an HMMA, with its HMMA count" $?

$tool "$tmp/fake.sass" --mix >"$tmp/mix.txt" 2>&1
grep -q "; inner loops: 5 (2 HMMA); " "$tmp/mix.txt"
check "--mix lists the loop nested in the main loop" $?
grep -q "; mix: HMMA 3 BRA 2 BAR 1 CS2R 1 FFMA 1 IMAD 1 ISETP 1 LDSM 1 MUFU 1$" "$tmp/mix.txt"
check "--mix counts the main loop's opcodes, most frequent first, without predicates or modifiers" $?

$tool "$tmp/fake.sass" --match bar >"$tmp/none.txt" 2>&1
[ ! -s "$tmp/none.txt" ]
check "--match leaves out kernels whose name does not contain it" $?

finish
