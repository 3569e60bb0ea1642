// The hot f32 CPU kernels compiled for the avx2 level (flags in kernels/CMakeLists.txt).
#define Eigen Eigen_avx2  // this copy's own Eigen symbols (see kernels_impl.h)
#define TANDEM_ISA_NS cpu_avx2
#define TANDEM_ISA_ENUM CpuIsa::Avx2
#include "kernels/cpu/isa/kernels_impl.h"
