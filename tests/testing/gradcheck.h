// Test helpers: finite-difference gradient checks and tensor comparison with
// tolerances (TANDEM_REQUIRE_GPU for GPU tests comes with them, from require_gpu.h).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "tests/testing/require_gpu.h"  // TANDEM_REQUIRE_GPU(), which the GPU tests use with these checks

namespace tandem::testing {

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-7;
  double rtol = 1e-5;
};

// Checks the gradients that backward computes for every input that requires grad
// against central finite differences. Inputs must be f64 CPU tensors. The output
// of f may have any shape: the check differentiates L = sum(f(inputs) * r) for a
// fixed random r, so every output element contributes.
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, GradcheckOptions options = {});

// |actual - expected| <= atol + rtol * |expected| elementwise (any devices and dtypes);
// reports the first mismatches and the largest error.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol);

// An f64 CPU tensor of the given shape with values from the Philox normal stream (seed).
Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype = DType::F64, Device device = Device::cpu());

}  // namespace tandem::testing
