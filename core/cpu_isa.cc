// CPU feature detection (GCC/Clang's __builtin_cpu_supports, which also checks
// that the OS saves the wide registers) and the TANDEM_CPU_ISA override.
#include "core/cpu_isa.h"

#include <cstdlib>

#include "core/check.h"

namespace tandem {

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Baseline: return "baseline";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512})
    if (name == cpu_isa_name(isa)) return isa;
  return std::nullopt;
}

bool cpu_supports(CpuIsa isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::Baseline: return true;
    case CpuIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::Avx512:
      // The flags kernels/cpu/isa/*_avx512.cc are compiled with.
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == CpuIsa::Baseline;
#endif
}

CpuIsa best_cpu_isa() {
  if (cpu_supports(CpuIsa::Avx512)) return CpuIsa::Avx512;
  if (cpu_supports(CpuIsa::Avx2)) return CpuIsa::Avx2;
  return CpuIsa::Baseline;
}

CpuIsa choose_cpu_isa(const char* env_value) {
  if (env_value == nullptr || *env_value == '\0') return best_cpu_isa();
  const std::optional<CpuIsa> isa = parse_cpu_isa(env_value);
  TANDEM_CHECK(isa.has_value(), "TANDEM_CPU_ISA={}: expected baseline, avx2 or avx512", env_value);
  TANDEM_CHECK(cpu_supports(*isa), "TANDEM_CPU_ISA={}: this CPU does not support it (best: {})", env_value,
               cpu_isa_name(best_cpu_isa()));
  return *isa;
}

CpuIsa selected_cpu_isa() {
  static const CpuIsa isa = choose_cpu_isa(std::getenv("TANDEM_CPU_ISA"));
  return isa;
}

}  // namespace tandem
