// Deterministic parameter initialisation from the Philox stream: every
// parameter draws from its own subsequence, handed out in construction order,
// so the same seed gives the same model on every rank and every device.
// Distributions follow PyTorch's defaults for each layer.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem::nn {

class Init {
 public:
  explicit Init(uint64_t seed) : seed_(seed) {}
  Tensor uniform(const Shape& shape, double bound);            // U(-bound, bound), f32
  Tensor normal(const Shape& shape, double mean, double std);  // N(mean, std^2), f32
  Tensor constant(const Shape& shape, double value);

 private:
  uint64_t seed_;
  uint64_t next_ = 0;
};

}  // namespace tandem::nn
