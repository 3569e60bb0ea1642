// Reading the PyTorch fixtures of tests/fixtures/optim/ (written by
// tests/fixtures/make_optim_fixtures.py): JSON files of f32 values stored as
// the exact doubles they are, with non-finite values as the strings "inf",
// "-inf" and "nan".
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem::testing {

// The parsed file tests/fixtures/optim/<name>; fails the test if it cannot be read.
nlohmann::json load_optim_fixture(const std::string& name);

std::vector<double> fixture_values(const nlohmann::json& values);
Shape fixture_shape(const nlohmann::json& shape);
// An f32 CPU tensor holding `values` with `shape`.
Tensor fixture_tensor(const nlohmann::json& values, const Shape& shape);

// |actual - expected| <= atol + rtol * |expected| for every element, reporting the worst one.
::testing::AssertionResult matches_fixture(const Tensor& actual, const nlohmann::json& expected, double rtol,
                                           double atol);

}  // namespace tandem::testing
