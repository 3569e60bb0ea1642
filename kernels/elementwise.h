// Differentiable elementwise ops on tensors of equal shape and dtype (no
// broadcasting). 16-bit inputs are computed in f32 and rounded once.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tandem::kernels {

Tensor add(const Tensor& a, const Tensor& b);      // a + b
Tensor mul(const Tensor& a, const Tensor& b);      // a * b
Tensor scale(const Tensor& x, double alpha);       // alpha * x
Tensor relu(const Tensor& x);                      // max(x, 0); gradient 0 at x <= 0
Tensor cast(const Tensor& x, DType dtype);         // x converted; the gradient is converted back

// cast of each of xs (all of one dtype, on one device), as slices of one new buffer, with no
// autograd history: record_cast makes each the cast of its tensor, at its first use. f32 to a
// 16-bit dtype on a GPU is one launch for the whole list (kernels/cuda/cast_many.cu); other
// pairs convert tensor by tensor. Each slice starts 16-byte aligned (a multiple of 8 elements in).
std::vector<Tensor> cast_many(const std::vector<Tensor>& xs, DType dtype);
// Makes y, a tensor without history holding cast(x, y.dtype())'s values, that cast for autograd
// (its gradient goes back to x converted), if x requires grad. Why not in cast_many: the backward
// runs ready nodes latest-made first (core/autograd/engine.cc), so a node made at the cast's first
// use runs where a cast made there would, right after the op that used it, and DDP's buckets fill
// in the same order; nodes made all at the forward's start would wait for the whole backward.
void record_cast(const Tensor& x, const Tensor& y);

}  // namespace tandem::kernels
