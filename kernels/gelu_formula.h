// GELU and its derivative, one definition for the CPU reference and the CUDA
// kernels (TANDEM_HD), in float for f32/f16/bf16 data and in double for f64.
//
//   exact ('none'): gelu(x) = x/2 * (1 + erf(x / sqrt(2)))
//   tanh:           gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
// as torch.nn.functional.gelu(approximate='none' | 'tanh').
#pragma once

#include <cmath>
#include <type_traits>

#include "core/half.h"  // TANDEM_HD

namespace tandem::kernels {

enum class GeluApproximation { None, Tanh };

namespace gelu_detail {
template <class A>
TANDEM_HD inline A erf_(A v) {
  if constexpr (std::is_same_v<A, float>) return erff(v);
  else return erf(v);
}
template <class A>
TANDEM_HD inline A tanh_(A v) {
  if constexpr (std::is_same_v<A, float>) return tanhf(v);
  else return tanh(v);
}
template <class A>
TANDEM_HD inline A exp_(A v) {
  if constexpr (std::is_same_v<A, float>) return expf(v);
  else return exp(v);
}
constexpr double kSqrt1_2 = 0.70710678118654752440;   // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;
}  // namespace gelu_detail

template <class A>
TANDEM_HD inline A gelu_value(A x, GeluApproximation approx) {
  using namespace gelu_detail;
  if (approx == GeluApproximation::Tanh) {
    A inner = A(kSqrt2OverPi) * (x + A(kCubic) * x * x * x);
    return A(0.5) * x * (A(1) + tanh_(inner));
  }
  return A(0.5) * x * (A(1) + erf_(x * A(kSqrt1_2)));
}

// d gelu(x) / dx.
template <class A>
TANDEM_HD inline A gelu_derivative(A x, GeluApproximation approx) {
  using namespace gelu_detail;
  if (approx == GeluApproximation::Tanh) {
    A x2 = x * x;
    A t = tanh_(A(kSqrt2OverPi) * (x + A(kCubic) * x2 * x));
    return A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * x2);
  }
  return A(0.5) * (A(1) + erf_(x * A(kSqrt1_2))) + x * A(kInvSqrt2Pi) * exp_(A(-0.5) * x * x);
}

}  // namespace tandem::kernels
