// Fused AdamW: for every tensor of a parameter group, in a few launches,
//   p *= 1 - lr*wd;  m = lerp(m, g, 1 - beta1);  v = beta2*v + (1 - beta2)*g^2;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// with t the tensor's step count (device memory, incremented by step_count.cu
// first) and lr from the host or, capturable, from device memory. Traffic: reads p, g, m, v and writes p, m, v once: 28 bytes per
// parameter, which is what bench/optim_bench.cc divides by. Numerics: f32
// per element, bias corrections in f64 once per tensor per block (see
// optim/update_math.h); the same formulas as the CPU reference, which may
// differ by FMA contraction only. If *found_inf != 0 every launch exits at once.
#include "optim/cuda/adamw_cuda.h"
#include "optim/cuda/multi_tensor.cuh"
#include "optim/cuda/step_count_cuda.h"

namespace tandem::optim {

namespace {

struct AdamWOp {
  AdamWHyper hyper;
  const float* found_inf;
  AdamWScalars s;

  __device__ bool skip() const { return found_inf != nullptr && *found_inf != 0.0f; }
  __device__ void prepare(const mt::Meta<4>& m, int t) { s = adamw_scalars(hyper, *m.step[t]); }
  template <bool Vec>
  __device__ void chunk(const mt::Meta<4>& m, int t, int64_t begin, int64_t end, int64_t) const {
    const AdamWScalars sc = s;
    // Operands: 0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq; all but the grad are written.
    mt::for_each_element<4, 0b1101u, Vec>(m, t, begin, end,
                                          [&](float (&x)[4]) { adamw_update(x[0], x[1], x[2], x[3], sc); });
  }
};

}  // namespace

void adamw_step_cuda(const TensorList& tensors, const AdamWHyper& hyper, const float* found_inf, void* stream) {
  increment_steps_cuda(tensors, found_inf, stream);
  mt::apply<4>(tensors, AdamWOp{hyper, found_inf, {}}, static_cast<cudaStream_t>(stream));
}

}  // namespace tandem::optim
