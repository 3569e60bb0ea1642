// The hot f32 CPU kernels compiled for the avx512 level (flags in kernels/CMakeLists.txt).
#define Eigen Eigen_avx512  // this copy's own Eigen symbols (see kernels_impl.h)
#define TANDEM_ISA_NS cpu_avx512
#define TANDEM_ISA_ENUM CpuIsa::Avx512
// GCC 12 flags its own _mm512_undefined_epi32 (`__m512i __Y = __Y;`) once
// _mm512_mul_epu32/_mm512_srli_epi64 are inlined into Philox (GCC bug 105593):
// a false positive in the compiler's header. The same code compiled for the
// other levels keeps the warning for our own variables.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/cpu/isa/kernels_impl.h"
