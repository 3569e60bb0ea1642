// Loss scaling on the device.
//
// Unscale and check (torch._amp_foreach_non_finite_check_and_unscale_): every
// gradient element is tested for inf/nan and multiplied by
// inv = float(1 / double(*scale)), all tensors in a few multi-tensor launches;
// a thread that saw a non-finite value stores 1 into *found_inf (a benign race:
// every writer stores the same value). Traffic: reads and writes each gradient
// once (8 bytes per parameter). Numerics: one f32 multiply, as PyTorch.
// Update scale (torch._amp_update_scale_): one thread reads found_inf, scale
// and the growth tracker and writes the new scale and tracker; the scale stays
// on the device, so neither kernel needs a host round trip.
#include "optim/cuda/amp_cuda.h"
#include "optim/cuda/multi_tensor.cuh"
#include "optim/update_math.h"

namespace tandem::optim {

namespace {

struct UnscaleOp {
  const float* scale;
  float* found_inf;
  float inv;

  __device__ bool skip() const { return false; }
  __device__ void prepare(const mt::Meta<1>&, int) { inv = inverse_scale(*scale); }
  template <bool Vec>
  __device__ void chunk(const mt::Meta<1>& m, int t, int64_t begin, int64_t end, int64_t) const {
    const float i = inv;
    bool nonfinite = false;
    mt::for_each_element<1, 1u, Vec>(m, t, begin, end,
                                     [&](float (&x)[1]) { x[0] = unscale_and_check(x[0], i, nonfinite); });
    if (nonfinite) *found_inf = 1.0f;
  }
};

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                    double growth_factor, double backoff_factor, int64_t growth_interval) {
  update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace

void unscale_and_check_cuda(const TensorList& grads, const float* scale, float* found_inf, void* stream) {
  mt::apply<1>(grads, UnscaleOp{scale, found_inf, 1.0f}, static_cast<cudaStream_t>(stream));
}

void update_scale_cuda(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval, void* stream) {
  update_scale_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(scale, growth_tracker, found_inf, growth_factor,
                                                                        backoff_factor, growth_interval);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::optim
