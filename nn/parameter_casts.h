// How a forward gets its parameters in the compute dtype.
//
// as_compute(param, ctx) is the one place a layer asks for a cast parameter
// (the linears' weights and biases, registered as ParameterUse::
// CastToComputeDtype). With no ParameterCasts in the context it casts that
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
#pragma once

#include <optional>
#include <unordered_map>

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

}  // namespace tandem::nn
