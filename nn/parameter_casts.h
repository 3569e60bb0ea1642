// How a forward gets its parameters in the compute dtype.
//
// as_compute(param, ctx) is where a layer asks for a cast parameter (the
// linears' weights and biases, registered as ParameterUse::CastToComputeDtype)
// whose gradient comes back through the cast (linear_parameter, below, also
// starts there). With no ParameterCasts in the context it casts that
// tensor there and then (kernels::cast: one op, one launch per tensor);
// with one, it returns the copy made with all the others, recorded for
// autograd at that first use.
//
// ParameterCastScope is what a model's forward opens first: under
// TANDEM_PARAMETER_CASTS=batched (kernels/parameter_casts.h), for a compute
// dtype other than the parameters', it casts every cast parameter of the
// module with one kernels::cast_many and installs the copies in the context
// until the scope ends. Copies never outlive the forward: the next forward,
// after an optimizer step, casts the new values. A scope inside another's
// forward leaves the outer copies in place.
//
// linear_parameter(param, ctx) is what a linear asks for a weight or bias whose
// gradient its own backward forms: as_compute's tensor, or under
// TANDEM_LINEAR_GRADIENTS=master (kernels/linear_gradients.h) the same values with
// no history and the master to take the gradient (kernels::LinearParameter), so
// no cast backward runs for it.
#pragma once

#include <optional>
#include <unordered_map>

#include "kernels/linear.h"
#include "nn/module.h"

namespace tandem::nn {

class ParameterCasts {
 public:
  // Casts module.cast_parameters() to dtype with one kernels::cast_many.
  ParameterCasts(const Module& module, DType dtype);
  // The copy of `param`, or null if it is not one of them. The first call for a parameter
  // records the copy as its cast for autograd (kernels::record_cast): its backward then runs
  // where that of a cast made here would.
  const Tensor* use(const Tensor& param);
  // The copy of `param`, or null, without recording it (linear_parameter, whose master takes the
  // gradient: the copy has history only if use() recorded it, and is then detached there).
  const Tensor* values(const Tensor& param) const;
  DType dtype() const { return dtype_; }

 private:
  struct Copy {
    Tensor tensor;
    bool recorded = false;
  };
  DType dtype_;
  std::unordered_map<const TensorImpl*, Copy> copies_;
};

class ParameterCastScope {
 public:
  ParameterCastScope(const Module& module, ForwardContext& ctx);
  ~ParameterCastScope();
  ParameterCastScope(const ParameterCastScope&) = delete;
  ParameterCastScope& operator=(const ParameterCastScope&) = delete;

 private:
  ForwardContext& ctx_;
  ParameterCasts* outer_;
  std::optional<ParameterCasts> casts_;
};

// The f32 master parameter as the compute dtype: the tensor itself, the context's batched copy,
// or a differentiable cast.
Tensor as_compute(const Tensor& param, const ForwardContext& ctx);

// A linear's weight or bias in the compute dtype, for the linear's backward to form its gradient:
// as_compute(param, ctx), or under TANDEM_LINEAR_GRADIENTS=master, for a compute dtype other than
// param's, its values with no history (the context's batched copy, or a cast made under NoGradGuard)
// with param as the master that takes the gradient. Not for a bias another op's backward sums (the
// encoder's row ops under TANDEM_BIAS_GRADIENT=row): that one is as_compute's.
kernels::LinearParameter linear_parameter(const Tensor& param, const ForwardContext& ctx);

}  // namespace tandem::nn
