#!/usr/bin/env bash
# tools/ptx_same.py pairs kernels by their signatures without namespaces and compares their PTX
# bodies up to names: renamed labels and local stack arrays, renumbered registers, a kernel moved into another namespace
# and a demoted __shared__ declaration are the same; a changed instruction is DIFFERENT; a kernel
# gone is missing; the exit status is 0 only when every kernel of the first listing is the same.
# Usage: ptx_same_test.sh REPO_ROOT
set -uo pipefail
root=$1
tool="python3 $root/tools/ptx_same.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
# kernel MANGLED BODY-INSTRUCTION LABEL REG: a PTX entry whose body uses the given label (and stack array)
# and register numbers.
kernel() {
  cat <<PTX
.visible .entry $1(
	.param .u64 $1_param_0
)
{
	.local .align 4 .b8 	__local_depot$3[16];
	.reg .f32 	%f<$4>;
	// demoted variable
	.shared .align 4 .b8 _ZZN6tandem7kernels3fooEvE4sums[64];
	ld.param.u64 	%rd1, [$1_param_0];
	mov.f32 	%f$4, 0f00000000;
\$L__BB$3_2:
	$2 	%f$((${4} + 1)), %f$4, %f$4;
	bra.uni 	\$L__BB$3_2;
	ret;

}
PTX
}
# void tandem::kernels::(anonymous namespace)::k<float, 4>(float const*) and the same k in ns::detail.
anon=_ZN6tandem7kernels12_GLOBAL__N_11kIfLi4EEEvPKT_
moved=_ZN6tandem7kernels6detail1kIfLi4EEEvPKT_
other=_ZN6tandem7kernels5otherIfEEvPKT_
{ kernel "$anon" add.f32 3 7; kernel "$other" mul.f32 4 2; } >"$tmp/before.ptx"
{ kernel "$moved" add.f32 9 12; } >"$tmp/after_same.ptx"
{ kernel "$moved" sub.f32 9 12; } >"$tmp/after_changed.ptx"

$tool "$tmp/before.ptx" "$tmp/after_same.ptx" --match '^void k<' >"$tmp/same.txt" 2>&1
check "a kernel moved to another namespace, relabelled and renumbered is the same (exit 0)" $?
grep -q "^same       void k<float, 4>(float const\*)" "$tmp/same.txt"
check "it is reported as same under its signature without namespaces" $?

$tool "$tmp/before.ptx" "$tmp/after_changed.ptx" --match '^void k<' >"$tmp/changed.txt" 2>&1
[ $? -eq 1 ]
check "a changed instruction exits 1" $?
grep -q "^DIFFERENT  void k<float, 4>" "$tmp/changed.txt" && grep -q "sub.f32" "$tmp/changed.txt"
check "it is reported as DIFFERENT with the differing line" $?

$tool "$tmp/before.ptx" "$tmp/after_same.ptx" >"$tmp/missing.txt" 2>&1
[ $? -eq 1 ] && grep -q "^missing    void other<float>(float const\*)" "$tmp/missing.txt"
check "a kernel absent from the second listing is missing and fails" $?

{ kernel "_ZN6tandem7kernels1kIfLi4ENS0_4MaskEEEvPKT_" add.f32 3 7; } >"$tmp/renamed_before.ptx"
{ kernel "_ZN6tandem7kernels1kIfLi4ENS0_11DropoutMaskEEEvPKT_" add.f32 5 8; } >"$tmp/renamed_after.ptx"
$tool "$tmp/renamed_before.ptx" "$tmp/renamed_after.ptx" --rename Mask=DropoutMask >"$tmp/renamed.txt" 2>&1
check "--rename pairs a kernel whose signature names a renamed type" $?

finish
