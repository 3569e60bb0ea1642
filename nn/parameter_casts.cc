#include "nn/parameter_casts.h"

#include "core/autograd/grad_mode.h"
#include "kernels/elementwise.h"
#include "kernels/linear_gradients.h"
#include "kernels/parameter_casts.h"

namespace tandem::nn {

ParameterCasts::ParameterCasts(const Module& module, DType dtype) : dtype_(dtype) {
  std::vector<Tensor> params;
  for (Tensor& p : module.cast_parameters())
    if (p.dtype() != dtype) params.push_back(std::move(p));
  const std::vector<Tensor> copies = kernels::cast_many(params, dtype);
  for (size_t i = 0; i < params.size(); ++i) copies_.emplace(params[i].impl(), Copy{copies[i]});
}

const Tensor* ParameterCasts::use(const Tensor& param) {
  const auto it = copies_.find(param.impl());
  if (it == copies_.end()) return nullptr;
  Copy& copy = it->second;
  if (!copy.recorded) kernels::record_cast(param, copy.tensor);
  copy.recorded = true;
  return &copy.tensor;
}

const Tensor* ParameterCasts::values(const Tensor& param) const {
  const auto it = copies_.find(param.impl());
  return it == copies_.end() ? nullptr : &it->second.tensor;
}

ParameterCastScope::ParameterCastScope(const Module& module, ForwardContext& ctx) : ctx_(ctx), outer_(ctx.casts) {
  if (outer_ || kernels::parameter_casts() != kernels::ParameterCastMode::Batched) return;
  casts_.emplace(module, ctx.compute_dtype);
  ctx_.casts = &*casts_;
}

ParameterCastScope::~ParameterCastScope() { ctx_.casts = outer_; }

Tensor as_compute(const Tensor& param, const ForwardContext& ctx) {
  if (param.dtype() == ctx.compute_dtype) return param;
  if (ctx.casts && ctx.casts->dtype() == ctx.compute_dtype)
    if (const Tensor* copy = ctx.casts->use(param)) return *copy;
  return kernels::cast(param, ctx.compute_dtype);
}

kernels::LinearParameter linear_parameter(const Tensor& param, const ForwardContext& ctx) {
  if (param.dtype() == ctx.compute_dtype || kernels::linear_gradients() != kernels::LinearGradients::Master)
    return as_compute(param, ctx);
  // A copy that as_compute has already recorded as a cast (a parameter used twice) has history: its
  // detached view holds the same values without it.
  if (ctx.casts && ctx.casts->dtype() == ctx.compute_dtype)
    if (const Tensor* copy = ctx.casts->values(param)) return {copy->detach(), param};
  NoGradGuard no_history;
  return {kernels::cast(param, ctx.compute_dtype), param};
}

}  // namespace tandem::nn
