#!/usr/bin/env bash
# The wide-ISA kernel objects must define no out-of-line code the linker could
# share with baseline code: every weak (COMDAT) symbol in kernels_avx2.cc.o and
# kernels_avx512.cc.o belongs to that object's own namespaces (Eigen_<isa>::,
# tandem::cpu_<isa>::). A std:: or plain Eigen:: instantiation there could be
# picked for the whole program and run AVX instructions on a baseline CPU.
#   isa_symbols_test.sh OBJECT_DIR
set -euo pipefail
dir=$1
status=0
for isa in avx2 avx512; do
  obj="$dir/kernels_$isa.cc.o"
  [[ -f $obj ]] || { echo "missing $obj"; exit 1; }
  bad=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[WVu]$/ { $1 = ""; $2 = ""; print }' |
        grep -v -e "Eigen_$isa::" -e "tandem::cpu_$isa::" -e '^ *DW.ref.__gxx_personality_v0$' || true)
  if [[ -n $bad ]]; then
    echo "kernels_$isa.cc.o shares weak symbols outside its namespaces:"
    echo "$bad" | head -20
    status=1
  else
    echo "kernels_$isa.cc.o: every weak symbol is its own"
  fi
done
exit $status
