// nn.Linear: y = x W^T + b with W [out, in] and b [out], initialised like
// PyTorch (W and b uniform in +-1/sqrt(in)). The f32 master parameters are cast
// to the context's compute dtype in forward (their gradients come back f32;
// nn/parameter_casts.h: as_compute).
#pragma once

#include "nn/init.h"
#include "nn/module.h"

namespace tandem::nn {

// A product x W^T and the bias that the op reading it is to add, both in the compute dtype.
struct ProductAndBias {
  Tensor product, bias;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Init& init);
  Tensor forward(const Tensor& x, const ForwardContext& ctx) const;
  // x W^T, leaving the bias (which must exist) to the op that reads it next, which fuses it into its
  // row kernel (the encoder layer's bias_gelu_dropout and bias + dropout + residual epilogues). Where
  // the bias gradient is formed is TANDEM_BIAS_GRADIENT's (kernels/bias_gradient.h): row, that op's
  // backward, given the bias itself; gemm, this product's backward (dw's GEMM), and that op gets the
  // bias detached.
  ProductAndBias forward_leaving_bias(const Tensor& x, const ForwardContext& ctx) const;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  // Handles sharing the registered parameters' state.
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn
