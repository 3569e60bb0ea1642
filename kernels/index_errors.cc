#include "kernels/index_errors.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/index_error_cuda.h"
#endif

namespace tandem::kernels {

void raise_pending_index_error() {
#if TANDEM_WITH_CUDA
  raise_pending_index_error_cuda();
#endif
}

}  // namespace tandem::kernels
