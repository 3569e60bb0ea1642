// Which x86-64 vector instruction set the CPU kernels use.
//
// One binary carries the hot f32 kernels compiled three times (kernels/cpu/isa/):
// baseline x86-64 (SSE2), AVX2 + FMA, and AVX-512 (F, DQ, BW, VL). The choice is
// made once per process: the best level the CPU (and OS) supports, unless
// TANDEM_CPU_ISA=baseline|avx2|avx512 asks for another. Asking for a level this
// CPU lacks is an error naming the variable, not a silent fallback, so a test
// or benchmark that forces a level really runs it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tandem {

enum class CpuIsa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

const char* cpu_isa_name(CpuIsa isa);
// "baseline" | "avx2" | "avx512" -> the level; anything else -> nullopt.
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);

// Whether this CPU can run code compiled for `isa` (baseline always can).
bool cpu_supports(CpuIsa isa);
// The highest level this CPU supports.
CpuIsa best_cpu_isa();

// The level for a TANDEM_CPU_ISA value (null or empty: best_cpu_isa()). Throws
// tandem::Error naming the variable if the value is unknown or the CPU lacks it.
CpuIsa choose_cpu_isa(const char* env_value);
// choose_cpu_isa(getenv("TANDEM_CPU_ISA")), evaluated once per process.
CpuIsa selected_cpu_isa();

}  // namespace tandem
