#include "nn/init.h"

#include "core/random.h"

namespace tandem::nn {

Tensor Init::uniform(const Shape& shape, double bound) {
  Tensor t = Tensor::empty(shape, DType::F32);
  fill_uniform(t, seed_, next_++, -bound, bound);
  return t;
}

Tensor Init::normal(const Shape& shape, double mean, double std) {
  Tensor t = Tensor::empty(shape, DType::F32);
  fill_normal(t, seed_, next_++, mean, std);
  return t;
}

Tensor Init::constant(const Shape& shape, double value) { return Tensor::full(shape, value, DType::F32); }

}  // namespace tandem::nn
