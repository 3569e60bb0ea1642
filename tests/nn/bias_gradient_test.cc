// Where the gradient of a bias that a row op adds is formed
// (TANDEM_BIAS_GRADIENT, kernels/bias_gradient.h): the switch's parsing;
// kernels::linear_deferred_bias against linear, against the column sums of
// its output gradient summed here in f64, and, followed by an op that adds the
// bias detached, against finite differences; and the encoder layer composed either
// way, whose gradients must be the row path's: every one bit for bit but the
// three deferred biases (out_proj, linear1, linear2), which sum the same terms
// in another order (f32) or rounded to the compute dtype first (16 bits), so
// they agree to that rounding. A bias counted twice (by the row op and the
// linear) or not at all fails the comparison by a factor. On a GPU the same
// layer comparison in f32 and bf16, where the three linears' weight gradients
// come from cuBLASLt's BGRADB GEMM instead of cublasGemmEx and may differ by a
// rounding too. The PyTorch fixtures hold the gemm path to PyTorch's modules
// (tests/nn/transformer_fixture_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/bias_gradient.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/reduce.h"
#include "nn/transformer.h"
#include "tests/testing/errors.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

namespace tandem::nn {
namespace {

using kernels::BiasGradient;
using testing::all_close;
using testing::random_tensor;

TEST(BiasGradientSwitch, IsRowUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(kernels::parse_bias_gradient(nullptr), BiasGradient::Row);
  EXPECT_EQ(kernels::parse_bias_gradient(""), BiasGradient::Row);
  EXPECT_EQ(kernels::parse_bias_gradient("row"), BiasGradient::Row);
  EXPECT_EQ(kernels::parse_bias_gradient("gemm"), BiasGradient::Gemm);
  EXPECT_TRUE(testing::rejects_naming_variable_and_value(kernels::parse_bias_gradient, "TANDEM_BIAS_GRADIENT", "GEMM"));
  EXPECT_STREQ(kernels::bias_gradient_name(BiasGradient::Gemm), "gemm");
}

TEST(BiasGradientSwitch, ATestOverrideWinsUntilItIsCleared) {
  const BiasGradient env = kernels::parse_bias_gradient(std::getenv("TANDEM_BIAS_GRADIENT"));
  for (BiasGradient where : {BiasGradient::Gemm, BiasGradient::Row}) {
    testing::ForcedSwitch forced(kernels::set_bias_gradient_for_testing, where);
    EXPECT_EQ(kernels::bias_gradient(), where);
  }
  EXPECT_EQ(kernels::bias_gradient(), env);
}

struct LinearRun {
  Tensor y, dx, dw, db;
};

// y = f(x, w, b) on [3, 5, 7] -> [3, 5, 6] and its three gradients for the output gradient `dy`.
template <class F>
LinearRun run_linear(F&& f, DType t, Device device, const Tensor& dy) {
  Tensor x = random_tensor({3, 5, 7}, 1, t, device).set_requires_grad(true);
  Tensor w = random_tensor({6, 7}, 2, t, device).set_requires_grad(true);
  Tensor b = random_tensor({6}, 3, t, device).set_requires_grad(true);
  Tensor y = f(x, w, b);
  y.backward(dy);
  return {y, x.grad(), w.grad(), b.grad()};
}

TEST(LinearDeferredBias, IsTheProductWithoutTheBiasAndHasLinearsGradientsBitForBit) {
  for (DType t : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Tensor dy = random_tensor({3, 5, 6}, 4, t);
    const LinearRun deferred = run_linear(kernels::linear_deferred_bias, t, Device::cpu(), dy);
    const auto without_bias = [](const Tensor& x, const Tensor& w, const Tensor&) { return kernels::linear(x, w); };
    const auto with_bias = [](const Tensor& x, const Tensor& w, const Tensor& b) { return kernels::linear(x, w, b); };
    const LinearRun unbiased = run_linear(without_bias, t, Device::cpu(), dy);
    const LinearRun biased = run_linear(with_bias, t, Device::cpu(), dy);
    EXPECT_EQ(deferred.y.to_double_vector(), unbiased.y.to_double_vector());
    EXPECT_EQ(deferred.dx.to_double_vector(), biased.dx.to_double_vector());
    EXPECT_EQ(deferred.dw.to_double_vector(), biased.dw.to_double_vector());
    EXPECT_EQ(deferred.db.to_double_vector(), biased.db.to_double_vector());
  }
}

// db[j] = sum over the 15 rows of dy[r, j], summed here in f64; the op sums in f32 (f64 for f64) and
// rounds once to the dtype.
void expect_bias_gradient_is_the_column_sum(DType t, Device device, double rtol) {
  const Tensor dy = random_tensor({3, 5, 6}, 4, t, device);
  const LinearRun run = run_linear(kernels::linear_deferred_bias, t, device, dy);
  const std::vector<double> g = dy.to_double_vector();
  std::vector<double> want(6, 0.0), magnitude(6, 0.0);
  for (size_t i = 0; i < g.size(); ++i) {
    want[i % 6] += g[i];
    magnitude[i % 6] += std::fabs(g[i]);
  }
  const std::vector<double> got = run.db.to_double_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j)
    EXPECT_NEAR(got[j], want[j], rtol * magnitude[j]) << "column " << j << ", " << dtype_name(t);
}

TEST(LinearDeferredBias, BiasGradientIsTheColumnSumOfTheOutputGradient) {
  expect_bias_gradient_is_the_column_sum(DType::F64, Device::cpu(), 1e-15);
  expect_bias_gradient_is_the_column_sum(DType::F32, Device::cpu(), 1e-6);
  expect_bias_gradient_is_the_column_sum(DType::BF16, Device::cpu(), 0x1p-8);
}

TEST(LinearDeferredBias, BiasGradientIsTheColumnSumOfTheOutputGradientOnTheGpu) {
  TANDEM_REQUIRE_GPU();
  const testing::ForcedSwitch gemm(kernels::set_bias_gradient_for_testing, BiasGradient::Gemm);
  expect_bias_gradient_is_the_column_sum(DType::F32, Device::cuda(0), 1e-6);
  expect_bias_gradient_is_the_column_sum(DType::BF16, Device::cuda(0), 0x1p-8);
  expect_bias_gradient_is_the_column_sum(DType::F16, Device::cuda(0), 0x1p-10);
}

// The contract: followed by an op that adds the bias detached, the pair has the gradients of
// x w^T + b, which finite differences of that sum check (f64), through the GELU the encoder adds too.
TEST(LinearDeferredBias, WithTheNextOpAddingTheBiasDetachedGradientsMatchFiniteDifferences) {
  using Composition = std::function<Tensor(const std::vector<Tensor>&)>;
  const Composition pair = [](const std::vector<Tensor>& in) {
    return kernels::add_bias(kernels::linear_deferred_bias(in[0], in[1], in[2]), in[2].detach());
  };
  const Composition with_gelu = [](const std::vector<Tensor>& in) {
    return kernels::bias_gelu(kernels::linear_deferred_bias(in[0], in[1], in[2]), in[2].detach(),
                              kernels::GeluApproximation::Tanh);
  };
  for (const Composition& f : {pair, with_gelu})
    EXPECT_TRUE(testing::gradcheck(f, {random_tensor({2, 3, 5}, 1).set_requires_grad(true),
                                       random_tensor({4, 5}, 2).set_requires_grad(true),
                                       random_tensor({4}, 3).set_requires_grad(true)}));
}

TEST(LinearDeferredBias, NeedsABiasOfTheOutputWidth) {
  const Tensor x = random_tensor({2, 7}, 1, DType::F32), w = random_tensor({6, 7}, 2, DType::F32);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::linear_deferred_bias(x, w, Tensor()); },
                                               "the bias must be defined"));
  EXPECT_TRUE(testing::throws_error_containing(
      [&] { kernels::linear_deferred_bias(x, w, random_tensor({5}, 3, DType::F32)); }, "must be [6]"));
}

struct LayerCase {
  Activation activation;
  bool norm_first;
  const char* name;
};

const LayerCase kLayerCases[] = {{Activation::Gelu, false, "post-norm GELU"},
                                 {Activation::GeluTanh, true, "pre-norm tanh GELU"},
                                 {Activation::Relu, false, "post-norm ReLU"}};

// The names of the parameters whose gradients the two paths form differently: the biases the row ops
// add, and (on a GPU, from cuBLASLt's GEMM) their linears' weights.
const std::set<std::string> kDeferredBiases = {"self_attn.out_proj.bias", "linear1.bias", "linear2.bias"};
const std::set<std::string> kTheirWeights = {"self_attn.out_proj.weight", "linear1.weight", "linear2.weight"};

struct LayerGradients {
  std::vector<double> output, input;
  std::vector<std::pair<std::string, Tensor>> parameters;  // name, gradient
};

// One training-mode forward (dropout 0.1 everywhere, padding in the mask) and backward of an encoder
// layer (d_model 32, 4 heads, FFN 64, 2 x 9 tokens) with the bias gradients formed `where`.
LayerGradients layer_gradients(BiasGradient where, const LayerCase& c, Device device, DType compute) {
  const testing::ForcedSwitch forced(kernels::set_bias_gradient_for_testing, where);
  Init init(11);
  TransformerEncoderLayer layer(32, 4, 64, 0.1, c.activation, c.norm_first, init);
  layer.to(device);
  layer.train(true);
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = 5;
  ctx.step = 3;
  Tensor x = random_tensor({2, 9, 32}, 12, compute, device).set_requires_grad(true);
  std::vector<double> m(18, 1.0);
  for (int i = 15; i < 18; ++i) m[static_cast<size_t>(i)] = 0.0;  // the second sequence's last three are padding
  Tensor mask = Tensor::from_vector(m, {2, 9}, DType::U8).to(device);
  Tensor y = layer.forward(x, mask, ctx);
  const Tensor r = random_tensor({2, 9, 32}, 13, DType::F32, device);
  Tensor loss = kernels::sum(kernels::mul(kernels::cast(y, DType::F32), r));
  loss.backward();
  LayerGradients out{y.to_double_vector(), x.grad().to_double_vector(), {}};
  for (const auto& [name, p] : layer.named_parameters()) out.parameters.emplace_back(name, p.grad());
  return out;
}

// The gemm path's gradients against the row path's: `exact` ones bit for bit, the rest within
// atol (a share of the largest magnitude of that gradient) + rtol.
void expect_gemm_path_gives_the_row_paths_gradients(Device device, DType compute, const std::set<std::string>& rounded,
                                                    double share, double rtol) {
  for (const LayerCase& c : kLayerCases) {
    SCOPED_TRACE(std::string(c.name) + ", " + std::string(dtype_name(compute)) + " on " + device.str());
    const LayerGradients row = layer_gradients(BiasGradient::Row, c, device, compute);
    const LayerGradients gemm = layer_gradients(BiasGradient::Gemm, c, device, compute);
    EXPECT_EQ(gemm.output, row.output) << "the forward is the same";
    EXPECT_EQ(gemm.input, row.input) << "the input gradient";
    ASSERT_EQ(gemm.parameters.size(), row.parameters.size());
    for (size_t i = 0; i < row.parameters.size(); ++i) {
      const auto& [name, want] = row.parameters[i];
      const Tensor& got = gemm.parameters[i].second;
      ASSERT_TRUE(want.defined() && got.defined()) << name;
      if (!rounded.count(name)) {
        EXPECT_EQ(got.to_double_vector(), want.to_double_vector()) << name;
        continue;
      }
      double largest = 0;
      for (double v : want.to_double_vector()) largest = std::max(largest, std::fabs(v));
      ASSERT_GT(largest, 0.0) << name;
      EXPECT_TRUE(all_close(got, want, share * largest, rtol)) << name;
    }
  }
}

TEST(BiasGradientGemm, EncoderLayerGradientsAreTheRowPathsButTheDeferredBiasesToARounding) {
  expect_gemm_path_gives_the_row_paths_gradients(Device::cpu(), DType::F32, kDeferredBiases, 1e-6, 1e-5);
  expect_gemm_path_gives_the_row_paths_gradients(Device::cpu(), DType::BF16, kDeferredBiases, 0x1p-7, 0x1p-7);
}

TEST(BiasGradientGemm, EncoderLayerGradientsOnTheGpuAreTheRowPathsButTheDeferredLinearsToARounding) {
  TANDEM_REQUIRE_GPU();
  std::set<std::string> rounded = kDeferredBiases;
  rounded.insert(kTheirWeights.begin(), kTheirWeights.end());
  expect_gemm_path_gives_the_row_paths_gradients(Device::cuda(0), DType::F32, rounded, 1e-6, 1e-5);
  expect_gemm_path_gives_the_row_paths_gradients(Device::cuda(0), DType::BF16, rounded, 0x1p-7, 0x1p-7);
}

}  // namespace
}  // namespace tandem::nn
