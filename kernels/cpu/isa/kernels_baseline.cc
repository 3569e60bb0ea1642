// The hot f32 CPU kernels compiled for the baseline level (flags in kernels/CMakeLists.txt).
#define Eigen Eigen_baseline  // this copy's own Eigen symbols (see kernels_impl.h)
#define TANDEM_ISA_NS cpu_baseline
#define TANDEM_ISA_ENUM CpuIsa::Baseline
#include "kernels/cpu/isa/kernels_impl.h"
