// Fused SGD: g += wd*p; buf = (first ? g : momentum*buf + (1 - dampening)*g);
// g = nesterov ? g + momentum*buf : buf; p -= lr*g, for every tensor of a
// parameter group in a few launches; lr from the host or, capturable, from
// device memory (read per tensor per block). With momentum, "first" is read from the
// tensor's step count (device memory, incremented by step_count.cu first), so
// a skipped first step leaves the buffer to be initialised by the next one.
// Traffic: with momentum, reads p, g, buf and writes p, buf (20 bytes per
// parameter); without, reads p, g and writes p (12 bytes). Numerics: f32, the
// formulas of optim/update_math.h, as the CPU reference. If *found_inf != 0
// every launch exits at once.
#include "optim/cuda/multi_tensor.cuh"
#include "optim/cuda/sgd_cuda.h"
#include "optim/cuda/step_count_cuda.h"

namespace tandem::optim {

namespace {

// Operands: 0 param, 1 grad, and with momentum 2 momentum_buffer.
template <bool Momentum>
struct SgdOp {
  static constexpr int kDepth = Momentum ? 3 : 2;
  SgdHyper hyper;  // hyper.lr_ptr, when set, is a device pointer: the scalars are computed here
  const float* found_inf;
  SgdScalars s;
  bool first;

  __device__ bool skip() const { return found_inf != nullptr && *found_inf != 0.0f; }
  __device__ void prepare(const mt::Meta<kDepth>& m, int t) {
    s = sgd_scalars(hyper);
    if constexpr (Momentum) first = *m.step[t] == 1.0f;
  }
  template <bool Vec>
  __device__ void chunk(const mt::Meta<kDepth>& m, int t, int64_t begin, int64_t end, int64_t) const {
    const SgdScalars sc = s;
    const bool f = first;
    if constexpr (Momentum) {
      mt::for_each_element<3, 0b101u, Vec>(m, t, begin, end,
                                           [&](float (&x)[3]) { sgd_update(x[0], x[1], x[2], true, f, sc); });
    } else {
      mt::for_each_element<2, 0b01u, Vec>(m, t, begin, end, [&](float (&x)[2]) {
        float unused = 0.0f;
        sgd_update(x[0], x[1], unused, false, false, sc);
      });
    }
  }
};

}  // namespace

void sgd_step_cuda(const TensorList& tensors, const SgdHyper& hyper, const float* found_inf, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (hyper.momentum != 0.0) {
    increment_steps_cuda(tensors, found_inf, stream);
    mt::apply<3>(tensors, SgdOp<true>{hyper, found_inf, {}, false}, s);
  } else {
    mt::apply<2>(tensors, SgdOp<false>{hyper, found_inf, {}, false}, s);
  }
}

}  // namespace tandem::optim
