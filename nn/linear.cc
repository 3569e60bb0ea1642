#include "nn/linear.h"

#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/linear.h"

namespace tandem::nn {

Tensor as_compute(const Tensor& param, const ForwardContext& ctx) {
  return param.dtype() == ctx.compute_dtype ? param : kernels::cast(param, ctx.compute_dtype);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Init& init) {
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  weight_ = register_parameter("weight", init.uniform({out_features, in_features}, bound));
  if (bias) bias_ = register_parameter("bias", init.uniform({out_features}, bound));
}

Tensor Linear::forward(const Tensor& x, const ForwardContext& ctx) const {
  return kernels::linear(x, as_compute(weight_, ctx), bias_.defined() ? as_compute(bias_, ctx) : Tensor());
}

}  // namespace tandem::nn
