#include "tests/optim/torch_fixture.h"

#include <cmath>
#include <fstream>
#include <limits>

namespace tandem::testing {

nlohmann::json load_optim_fixture(const std::string& name) {
  const std::string path = std::string(TANDEM_FIXTURES_DIR) + "/optim/" + name;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open fixture " << path << " (run tests/fixtures/make_optim_fixtures.py)";
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in);
}

std::vector<double> fixture_values(const nlohmann::json& values) {
  std::vector<double> out;
  for (const auto& v : values) {
    if (v.is_number()) {
      out.push_back(v.get<double>());
      continue;
    }
    const std::string s = v.get<std::string>();
    if (s == "inf") out.push_back(std::numeric_limits<double>::infinity());
    else if (s == "-inf") out.push_back(-std::numeric_limits<double>::infinity());
    else out.push_back(std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

Shape fixture_shape(const nlohmann::json& shape) { return shape.get<Shape>(); }

Tensor fixture_tensor(const nlohmann::json& values, const Shape& shape) {
  return Tensor::from_vector(fixture_values(values), shape, DType::F32);
}

::testing::AssertionResult matches_fixture(const Tensor& actual, const nlohmann::json& expected, double rtol,
                                           double atol) {
  const std::vector<double> a = actual.to_double_vector();
  const std::vector<double> e = fixture_values(expected.is_array() ? expected : nlohmann::json::array({expected}));
  if (a.size() != e.size())
    return ::testing::AssertionFailure() << "size " << a.size() << ", fixture has " << e.size();
  double worst = 0.0;
  size_t worst_i = 0;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(a[i] - e[i]);
    const double excess = err - (atol + rtol * std::fabs(e[i]));
    if (!(excess <= 0.0)) ++bad;
    if (!(err <= worst)) {
      worst = err;
      worst_i = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ; worst at " << worst_i
                                       << ": " << a[worst_i] << " vs fixture " << e[worst_i] << " (|diff| " << worst
                                       << ")";
}

}  // namespace tandem::testing
