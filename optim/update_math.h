// The per-element arithmetic of every fused optimizer kernel, shared by the CPU
// reference loops and the CUDA kernels so both compute the same formulas.
//
// The formulas and their order of operations follow PyTorch's single-tensor
// implementations (torch/optim/adam.py with decoupled weight decay,
// torch/optim/sgd.py, torch.amp's unscale and update-scale kernels):
// per-step scalars (bias corrections, step size) are computed in f64 from the
// hyper-parameters and rounded to f32 once; per-element work is f32, as
// PyTorch does for f32 tensors. The only differences left are the order in
// which a compiler contracts a*b+c into an FMA (nvcc does, the CPU build and
// PyTorch's scalar loops do not), worth about one ulp per operation.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"  // TANDEM_HD

namespace tandem::optim {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  // Capturable optimizers: the lr in the kernel's memory space (host for the CPU loops, device
  // for the CUDA kernels), read when the update runs instead of `lr`; the same value gives the
  // same result bit for bit.
  const double* lr_ptr = nullptr;
};

struct SgdHyper {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  const double* lr_ptr = nullptr;  // as AdamWHyper::lr_ptr
};

template <class Hyper>
TANDEM_HD inline double lr_of(const Hyper& h) {
  return h.lr_ptr ? *h.lr_ptr : h.lr;
}

TANDEM_HD inline bool is_finite(float x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// --- AdamW --------------------------------------------------------------------

// The scalars of one AdamW step of a tensor whose step count (already
// incremented for this step) is `step`.
struct AdamWScalars {
  float decay;          // 1 - lr * weight_decay (decoupled weight decay)
  float w1;             // 1 - beta1, the lerp weight of exp_avg towards grad
  float beta2, w2;      // exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
  float bc2_sqrt;       // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
};

TANDEM_HD inline AdamWScalars adamw_scalars(const AdamWHyper& h, double step) {
  const double lr = lr_of(h);
  AdamWScalars s;
  s.decay = static_cast<float>(1.0 - lr * h.weight_decay);
  s.w1 = static_cast<float>(1.0 - h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.w2 = static_cast<float>(1.0 - h.beta2);
  const double bc1 = 1.0 - pow(h.beta1, step);
  const double bc2 = 1.0 - pow(h.beta2, step);
  s.bc2_sqrt = static_cast<float>(pow(bc2, 0.5));
  s.eps = static_cast<float>(h.eps);
  s.neg_step_size = static_cast<float>(-(lr / bc1));
  return s;
}

// param.mul_(1 - lr*wd); exp_avg.lerp_(grad, 1 - beta1);
// exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
// denom = exp_avg_sq.sqrt() / bc2_sqrt + eps; param.addcdiv_(exp_avg, denom, -step_size).
TANDEM_HD inline void adamw_update(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  p = p * s.decay;
  m = s.w1 < 0.5f ? m + s.w1 * (g - m) : g - (g - m) * (1.0f - s.w1);  // torch's lerp
  v = v * s.beta2;
  v = v + s.w2 * g * g;
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  p = p + s.neg_step_size * m / denom;
}

// --- SGD ----------------------------------------------------------------------

struct SgdScalars {
  float neg_lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov;
};

TANDEM_HD inline SgdScalars sgd_scalars(const SgdHyper& h) {
  return {static_cast<float>(-lr_of(h)), static_cast<float>(h.momentum), static_cast<float>(1.0 - h.dampening),
          static_cast<float>(h.weight_decay), h.nesterov};
}

// g += wd * p; buf = first ? g : momentum * buf + (1 - dampening) * g;
// g = nesterov ? g + momentum * buf : buf; p -= lr * g. Without momentum, buf is untouched.
TANDEM_HD inline void sgd_update(float& p, float g, float& buf, bool use_momentum, bool first_step,
                                 const SgdScalars& s) {
  if (s.weight_decay != 0.0f) g = g + s.weight_decay * p;
  if (use_momentum) {
    buf = first_step ? g : buf * s.momentum + s.one_minus_dampening * g;
    g = s.nesterov ? g + s.momentum * buf : buf;
  }
  p = p + s.neg_lr * g;
}

// --- loss scaling ---------------------------------------------------------------

// torch._amp_foreach_non_finite_check_and_unscale_: checks the scaled value,
// then multiplies by inv_scale = float(1 / double(scale)).
TANDEM_HD inline float unscale_and_check(float g, float inv_scale, bool& found_nonfinite) {
  if (!is_finite(g)) found_nonfinite = true;
  return inv_scale == 1.0f ? g : g * inv_scale;
}

TANDEM_HD inline float inverse_scale(float scale) { return static_cast<float>(1.0 / static_cast<double>(scale)); }

// torch._amp_update_scale_: back off and reset on inf/nan; otherwise count the
// clean step and grow (if the result stays finite) after growth_interval of them.
TANDEM_HD inline void update_scale(float& scale, int32_t& growth_tracker, float found_inf, double growth_factor,
                                   double backoff_factor, int64_t growth_interval) {
  if (found_inf != 0.0f) {
    scale = static_cast<float>(scale * backoff_factor);
    growth_tracker = 0;
    return;
  }
  const int32_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(scale * growth_factor);
    if (is_finite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
}

// --- clipping -------------------------------------------------------------------

// torch.nn.utils.clip_grad_norm_: coef = clamp(max_norm / (norm + 1e-6), max=1),
// in f32; a NaN norm gives a NaN coefficient, as torch.clamp does.
TANDEM_HD inline float clip_coefficient(float total_norm, double max_norm) {
  const float c = static_cast<float>(max_norm) / (total_norm + 1e-6f);
  return c > 1.0f ? 1.0f : c;
}

}  // namespace tandem::optim
