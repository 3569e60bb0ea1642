// Argument checks shared by the Tensor-level ops: every input defined, on one
// device, of one dtype. Messages name the op and the offending tensor.
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace tandem::kernels {

void check_same_device_and_dtype(const char* op, std::initializer_list<const Tensor*> tensors);
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);

}  // namespace tandem::kernels
