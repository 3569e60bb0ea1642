// clip_grad_norm_ against torch.nn.utils.clip_grad_norm_
// (tests/fixtures/optim/clip_grad_norm.json) and its edge cases.
//
// Tolerance: the norm and the clipped gradients to rtol 1e-6. PyTorch takes
// per-tensor norms and then the norm of those; we sum all squares at once
// (in f64 on the CPU): the same value up to a rounding or two in f32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/thread_pool.h"
#include "optim/clip_grad.h"
#include "tests/optim/torch_fixture.h"

namespace tandem::optim {
namespace {

using testing::fixture_shape;
using testing::fixture_tensor;
using testing::matches_fixture;

TEST(ClipGradNorm, MatchesPyTorch) {
  const nlohmann::json fixture = testing::load_optim_fixture("clip_grad_norm.json");
  ASSERT_EQ(fixture["cases"].size(), 2u);
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Tensor> params;
    for (size_t i = 0; i < c["shapes"].size(); ++i) {
      const Shape shape = fixture_shape(c["shapes"][i]);
      Tensor p = Tensor::zeros(shape).set_requires_grad(true);
      if (!c["grads"][i].is_null()) p.set_grad(fixture_tensor(c["grads"][i], shape));
      params.push_back(p);
    }
    Tensor norm = clip_grad_norm_(params, c["max_norm"]);
    EXPECT_EQ(norm.dim(), 0);
    EXPECT_TRUE(matches_fixture(norm, c["total_norm"], 1e-6, 0));
    for (size_t i = 0; i < params.size(); ++i) {
      if (c["clipped"][i].is_null()) EXPECT_FALSE(params[i].grad().defined());
      else EXPECT_TRUE(matches_fixture(params[i].grad(), c["clipped"][i], 1e-6, 1e-8)) << "param " << i;
    }
  }
}

TEST(ClipGradNorm, ScalesToExactlyMaxNormUpToTheEpsilon) {
  Tensor p = Tensor::zeros({2}).set_requires_grad(true);
  p.set_grad(Tensor::from_vector(std::vector<double>{30, 40}, {2}));
  EXPECT_NEAR(clip_grad_norm_({p}, 5.0).item(), 50.0, 1e-5);
  const std::vector<double> g = p.grad().to_double_vector();
  EXPECT_NEAR(std::hypot(g[0], g[1]), 5.0, 1e-5);
}

TEST(ClipGradNorm, NoGradientsGiveAZeroNorm) {
  Tensor p = Tensor::zeros({3}).set_requires_grad(true);
  EXPECT_EQ(clip_grad_norm_({p}, 1.0).item(), 0.0);
}

TEST(ClipGradNorm, InfiniteGradientGivesAnInfiniteNorm) {
  Tensor p = Tensor::zeros({2}).set_requires_grad(true);
  p.set_grad(Tensor::from_vector(std::vector<double>{std::numeric_limits<double>::infinity(), 1}, {2}));
  EXPECT_TRUE(std::isinf(clip_grad_norm_({p}, 1.0).item()));
}

// Several tensors, one spanning many of the CPU path's summation blocks plus a tail.
std::vector<Tensor> large_gradients() {
  std::vector<Tensor> params;
  uint64_t state = 12345;
  for (int64_t n : {int64_t{5}, int64_t{300007}, int64_t{16384}, int64_t{1}}) {
    std::vector<double> g(static_cast<size_t>(n));
    for (double& x : g) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<double>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / (1 << 20);
    }
    Tensor p = Tensor::zeros({n}).set_requires_grad(true);
    p.set_grad(Tensor::from_vector(g, {n}));
    params.push_back(p);
  }
  return params;
}

TEST(ClipGradNorm, LargeGradientsGiveTheExactNormToF32Rounding) {
  std::vector<Tensor> params = large_gradients();
  long double sum_sq = 0;
  for (const Tensor& p : params)
    for (double x : p.grad().to_double_vector()) sum_sq += static_cast<long double>(x) * x;
  const double exact = std::sqrt(static_cast<double>(sum_sq));
  EXPECT_NEAR(clip_grad_norm_(params, 1e30).item(), exact, exact * 1e-7);
}

TEST(ClipGradNorm, TheNormAndTheClippedGradientsDoNotDependOnTheThreadCount) {
  const int threads = intra_op_threads();
  std::vector<double> norms;
  std::vector<std::vector<double>> clipped;
  for (int t : {1, 2, 3}) {
    set_intra_op_threads(t);
    std::vector<Tensor> params = large_gradients();
    norms.push_back(clip_grad_norm_(params, 1.0).item());
    clipped.push_back(params[1].grad().to_double_vector());
  }
  set_intra_op_threads(threads);
  EXPECT_EQ(norms[0], norms[1]);
  EXPECT_EQ(norms[0], norms[2]);
  EXPECT_EQ(clipped[0], clipped[1]);
  EXPECT_EQ(clipped[0], clipped[2]);
}

TEST(ClipGradNorm, RejectsNonF32GradientsAndNegativeMaxNorm) {
  Tensor p = Tensor::zeros({2}, DType::F64).set_requires_grad(true);
  p.set_grad(Tensor::zeros({2}, DType::F64));
  EXPECT_THROW(clip_grad_norm_({p}, 1.0), Error);
  EXPECT_THROW(clip_grad_norm_({}, -1.0), Error);
}

}  // namespace
}  // namespace tandem::optim
