// Attention against PyTorch: tests/fixtures/attention.json holds the output of
// F.multi_head_attention_forward (identity projections) on packed qkv, and the
// gradient of out . dout with respect to qkv, in f64, for several shapes with
// and without padding, including a sequence that is all padding (written by
// tests/fixtures/make_attention_fixture.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/attention.h"
#include "tests/kernels/attention_testing.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;

nlohmann::json load_fixture() {
  const std::string path = std::string(TANDEM_FIXTURES_DIR) + "/attention.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

class PyTorchFixture : public ::testing::TestWithParam<DType> {};

TEST_P(PyTorchFixture, OutputAndGradientMatchMultiHeadAttention) {
  const DType t = GetParam();
  // f64 agrees with PyTorch's f64 to summation order; f32 to f32 rounding of O(1) values.
  const double tol = t == DType::F64 ? 1e-12 : 2e-5;
  const nlohmann::json fixture = load_fixture();
  ASSERT_GE(fixture["cases"].size(), 5u);
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const int64_t B = c["batch"], S = c["seq"], H = c["heads"], Dh = c["head_dim"];
    const Shape qkv_shape{B, S, 3 * H * Dh}, out_shape{B, S, H * Dh};
    auto values = [&](const char* key, const Shape& shape, DType dtype) {
      return Tensor::from_vector(c[key].get<std::vector<double>>(), shape, dtype);
    };
    Tensor qkv = values("qkv", qkv_shape, t).set_requires_grad(true);
    Tensor mask = c["lengths"].is_null() ? Tensor() : testing::padding_mask(c["lengths"].get<std::vector<int64_t>>(), S);
    Tensor out = attention(qkv, mask, static_cast<int>(H));
    out.backward(values("dout", out_shape, t));
    EXPECT_TRUE(all_close(out, values("out", out_shape, DType::F64), tol, tol)) << "output";
    EXPECT_TRUE(all_close(qkv.grad(), values("dqkv", qkv_shape, DType::F64), tol, tol)) << "gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PyTorchFixture, ::testing::Values(DType::F64, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem::kernels
