#include "nn/linear.h"

#include <cmath>

#include "core/check.h"
#include "kernels/bias_gradient.h"
#include "kernels/linear.h"
#include "nn/parameter_casts.h"

namespace tandem::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Init& init) {
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  weight_ = register_parameter("weight", init.uniform({out_features, in_features}, bound),
                               ParameterUse::CastToComputeDtype);
  if (bias) bias_ = register_parameter("bias", init.uniform({out_features}, bound), ParameterUse::CastToComputeDtype);
}

Tensor Linear::forward(const Tensor& x, const ForwardContext& ctx) const {
  return kernels::linear(x, linear_parameter(weight_, ctx),
                         bias_.defined() ? linear_parameter(bias_, ctx) : kernels::LinearParameter());
}

ProductAndBias Linear::forward_leaving_bias(const Tensor& x, const ForwardContext& ctx) const {
  TANDEM_CHECK(bias_.defined(), "Linear::forward_leaving_bias: the layer has no bias");
  const kernels::LinearParameter w = linear_parameter(weight_, ctx);
  if (kernels::bias_gradient() == kernels::BiasGradient::Gemm) {
    // This product's backward forms the bias gradient: the row op gets the values alone.
    const kernels::LinearParameter b = linear_parameter(bias_, ctx);
    return {kernels::linear_deferred_bias(x, w, b), b.values.detach()};
  }
  return {kernels::linear(x, w), as_compute(bias_, ctx)};  // the row op's backward sums the bias gradient
}

}  // namespace tandem::nn
