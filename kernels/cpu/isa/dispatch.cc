// Picks the kernel table for the selected instruction-set level (core/cpu_isa.h).
#include "core/check.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels {

const CpuKernels* cpu_kernels_for(CpuIsa isa) {
  if (!cpu_supports(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::Baseline: return &cpu_baseline::kernels();
#if TANDEM_CPU_ISA_X86
    case CpuIsa::Avx2: return &cpu_avx2::kernels();
    case CpuIsa::Avx512: return &cpu_avx512::kernels();
#else
    default: return nullptr;  // cpu_supports() said yes, but this build has only the baseline copy
#endif
  }
  return nullptr;
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels* table = [] {
    const CpuKernels* k = cpu_kernels_for(selected_cpu_isa());
    TANDEM_CHECK(k != nullptr, "no CPU kernels built for instruction set {}", cpu_isa_name(selected_cpu_isa()));
    return k;
  }();
  return *table;
}

}  // namespace tandem::kernels
