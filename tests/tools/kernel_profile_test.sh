#!/usr/bin/env bash
# tools/kernel_profile.py reads Nsight Compute's CSV by its header and sums
# kernel time by kernel name. Fixtures in ncu's --csv layout, with its
# "==PROF==" lines, thousands separators and mixed units.
# Usage: kernel_profile_test.sh REPO_ROOT
set -uo pipefail
root=$1
tool="python3 $root/tools/kernel_profile.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../testing/shell_checks.sh
source "$(dirname "$0")/../testing/shell_checks.sh"
header='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
row() {  # row ID KERNEL UNIT VALUE [METRIC]
  printf '"%s","1","tandem","h","%s","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","%s","%s","%s"\n' \
    "$1" "$2" "${5:-gpu__time_duration.sum}" "$3" "$4"
}
{
  echo "==PROF== Connected to process 1 (tandem)"
  echo "$header"
  row 0 'void tandem::kernels::(anonymous namespace)::forward_kernel<__nv_bfloat16, 64>(const T1 *, int)' nsecond '1,500,000'
  row 1 'void tandem::kernels::(anonymous namespace)::forward_kernel<float, 32>(const T1 *, int)' usecond '2,500'
  row 2 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n' msecond '6'
  row 3 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n' nsecond '4000' 'dram__bytes.sum'
  echo "==PROF== Disconnected from process 1"
} >"$tmp/run.csv"
$tool "$tmp/run.csv" --json "$tmp/out.json" >"$tmp/out.txt" 2>&1
check "a CSV with kernel rows is read" $?
grep -q '^3 kernel launches, 10.000 ms' "$tmp/out.txt"; check "durations in ns, us and ms add up; other metrics are not durations" $?
grep -q '^| sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n | 1 | 6.000 | 60.0 % |$' "$tmp/out.txt"; check "the largest kernel comes first with its share" $?
grep -q '^| tandem::kernels::forward_kernel | 2 | 4.000 | 40.0 % |$' "$tmp/out.txt"; check "template instances are one row, named without arguments" $?
python3 -c "import json,sys; d=json.load(open('$tmp/out.json')); sys.exit(not (d['launches']==3 and len(d['kernels'])==2))"
check "--json writes every row" $?

$tool "$tmp/run.csv" --top 1 >"$tmp/top.txt" 2>&1
grep -q '^| (1 more) | 2 | 4.000 | 40.0 % |$' "$tmp/top.txt"; check "--top sums the rest in one row" $?

echo "==PROF== nothing profiled" >"$tmp/empty.csv"
$tool "$tmp/empty.csv" >"$tmp/empty.txt" 2>&1
[ $? -ne 0 ] && grep -q "empty.csv holds no gpu__time_duration.sum rows" "$tmp/empty.txt"; check "no kernel rows is an error naming the file" $?

printf '"ID","Name","Value"\n"0","k","1"\n' >"$tmp/other.csv"
$tool "$tmp/other.csv" >"$tmp/other.txt" 2>&1
[ $? -ne 0 ] && grep -q "other.csv: the CSV has no column Kernel Name, Metric Name, Metric Value" "$tmp/other.txt"
check "a CSV without ncu's columns is an error naming them" $?

{ echo "$header"; row 0 k furlong 3; } >"$tmp/unit.csv"
$tool "$tmp/unit.csv" >"$tmp/unit.txt" 2>&1
[ $? -ne 0 ] && grep -q "unit.csv: row 2: unknown time unit 'furlong'" "$tmp/unit.txt"; check "an unknown unit is an error naming the row" $?

$tool "$tmp/missing.csv" >"$tmp/missing.txt" 2>&1
[ $? -ne 0 ] && grep -q "cannot read $tmp/missing.csv" "$tmp/missing.txt"; check "a missing file is an error naming it" $?
finish
