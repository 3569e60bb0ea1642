// TANDEM_SIMD_CLONES: compiles a CPU reference loop twice, for AVX2 and for
// the baseline ISA, and picks one at load time (GCC/Clang target_clones). The
// AdamW and SGD loops are bound by arithmetic (sqrt, divide) at SSE2 width,
// and AVX2 about doubles them. Both clones give the same bits: IEEE sqrt and
// divide are exact in any width, and ISO C++ mode does not contract a*b+c.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define TANDEM_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TANDEM_SIMD_CLONES
#endif
