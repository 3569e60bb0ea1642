// PowerSGD's hook (ddp/powersgd_hook.h) in one process over a one-rank ring
// group, against its definition: Gram-Schmidt gives orthonormal columns of
// the same span, a gradient of rank <= r passes unchanged, error feedback
// loses nothing over steps (what was applied plus what is still owed equals
// the sum of the gradients), vectors and small matrices travel exactly, and
// the bytes sent follow (n + m) r. Across ranks: tests/ddp/ddp_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "comm/ring_process_group.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/autograd/grad_mode.h"
#include "ddp/powersgd_hook.h"

namespace tandem::ddp {
namespace {

class PowerSGD : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<comm::StoreServer>(comm::StoreServer::Options{});
    auto store = std::make_shared<comm::Store>("127.0.0.1", server_->port());
    group_ = std::make_shared<comm::RingProcessGroup>(store, 0, 1);
  }

  // A bucket over `shapes` holding `values` (one flat vector), run through the hook to the end.
  std::vector<double> reduce(PowerSGDState& state, const std::vector<Shape>& shapes, const std::vector<double>& values,
                             bool is_last = true) {
    NoGradGuard no_grad;
    GradBucket b;
    b.index = 0;
    b.is_last = is_last;
    b.buffer = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
    int64_t at = 0;
    for (const Shape& s : shapes) {
      b.parameters.push_back(Tensor::zeros(s));
      b.offsets.push_back(at);
      at += b.parameters.back().numel();
    }
    EXPECT_EQ(at, static_cast<int64_t>(values.size()));
    PendingReduction r = hook_(&state, *group_, b);
    EXPECT_TRUE(r.work->wait(std::chrono::seconds(10)));
    if (r.finish) r.finish();
    return b.buffer.to_double_vector();
  }

  static std::vector<double> random_values(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> normal;
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<float>(normal(gen));  // exact in the f32 bucket
    return v;
  }

  std::unique_ptr<comm::StoreServer> server_;
  std::shared_ptr<comm::ProcessGroup> group_;
  CommHook hook_ = powerSGD_hook();
};

PowerSGDOptions compress_from_the_start(int64_t rank) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = rank;
  o.start_powerSGD_iter = 2;
  o.min_compression_rate = 0;  // compress every matrix, however small
  return o;
}

void skip_plain_iterations(PowerSGDState& state, const std::function<void()>& one_iteration) {
  while (state.iteration() < state.options().start_powerSGD_iter) one_iteration();
}

TEST(PowerSGDOrthogonalize, GivesOrthonormalColumnsSpanningTheSameSpace) {
  const int64_t rows = 6, cols = 3;
  std::vector<double> a = {1, 2, 0, 0, 1, 1, 3, 0, 2, 1, 1, 1, 0, 2, 5, 4, 0, 1};
  const std::vector<double> original = a;
  orthogonalize_columns(a, rows, cols, 0);
  auto col = [&](const std::vector<double>& m, int64_t c) {
    std::vector<double> v(rows);
    for (int64_t r = 0; r < rows; ++r) v[r] = m[r * cols + c];
    return v;
  };
  auto dot = [](const std::vector<double>& x, const std::vector<double>& y) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
  };
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j) EXPECT_NEAR(dot(col(a, i), col(a, j)), i == j ? 1.0 : 0.0, 1e-12) << i << j;
  // Column k of the input lies in the span of output columns 0..k (Gram-Schmidt keeps the nested spans).
  for (int64_t k = 0; k < cols; ++k) {
    std::vector<double> residual = col(original, k);
    for (int64_t i = 0; i <= k; ++i) {
      const double c = dot(residual, col(a, i));
      for (int64_t r = 0; r < rows; ++r) residual[r] -= c * a[r * cols + i];
    }
    EXPECT_NEAR(std::sqrt(dot(residual, residual)), 0.0, 1e-12) << "column " << k;
  }
}

TEST(PowerSGDOrthogonalize, MakesAColumnDependentOnThePreviousOnesZero) {
  // Column 2 = column 0 + 2 column 1 ([4, 3]): no third direction exists.
  std::vector<double> a = {1, 0.5, 2, 2, -1, 0, 0, 3, 6, 1, 1, 3};
  orthogonalize_columns(a, 4, 3, 0);
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(a[r * 3 + 2], 0.0) << r;
  double n0 = 0, n1 = 0;
  for (int64_t r = 0; r < 4; ++r) n0 += a[r * 3] * a[r * 3], n1 += a[r * 3 + 1] * a[r * 3 + 1];
  EXPECT_NEAR(n0, 1.0, 1e-12);
  EXPECT_NEAR(n1, 1.0, 1e-12);
}

TEST(PowerSGDOrthogonalize, LeavesAZeroColumnZeroInsteadOfNaN) {
  std::vector<double> a = {0, 1, 0, 1};  // [2, 2], column 0 is zero
  orthogonalize_columns(a, 2, 2, 0);
  EXPECT_EQ(a[0], 0.0);
  EXPECT_EQ(a[2], 0.0);
  EXPECT_NEAR(a[1] * a[1] + a[3] * a[3], 1.0, 1e-12);
}

TEST_F(PowerSGD, BeforeStartIterationTheHookIsThePlainAverage) {
  PowerSGDOptions o = compress_from_the_start(1);
  o.start_powerSGD_iter = 3;
  PowerSGDState state(o);
  const std::vector<double> g = random_values(12, 1);
  // Two buckets per iteration: only the last one counts an iteration.
  EXPECT_EQ(reduce(state, {{3, 4}}, g, /*is_last=*/false), g);
  EXPECT_EQ(state.iteration(), 0);
  EXPECT_EQ(reduce(state, {{3, 4}}, g, /*is_last=*/true), g);
  EXPECT_EQ(state.iteration(), 1);
  EXPECT_EQ(state.numel_after_compression(), state.numel_before_compression());
}

TEST_F(PowerSGD, AGradientOfRankAtMostRPassesUnchanged) {
  PowerSGDState state(compress_from_the_start(2));
  // M = u1 v1^T + u2 v2^T: rank 2, [5, 7].
  const std::vector<double> u1 = {1, -2, 0.5, 3, 1}, v1 = {2, 0, 1, -1, 0.5, 1, 3};
  const std::vector<double> u2 = {0, 1, 1, -1, 2}, v2 = {1, 1, -2, 0, 0, 3, 1};
  std::vector<double> m(35);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) m[i * 7 + j] = u1[i] * v1[j] + u2[i] * v2[j];
  skip_plain_iterations(state, [&] { reduce(state, {{5, 7}}, m); });
  const std::vector<double> got = reduce(state, {{5, 7}}, m);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(got[i], m[i], 1e-4) << i;
}

TEST_F(PowerSGD, AtFullRankARankDeficientGradientPassesUnchanged) {
  // A batch gradient has rank <= batch size: [24, 12] of rank 4, compressed at r = 12 (P spans R^12 of noise
  // beyond rank 4, still orthonormal).
  PowerSGDState state(compress_from_the_start(12));
  const std::vector<double> a = random_values(24 * 4, 3), b = random_values(4 * 12, 4);
  std::vector<double> m(24 * 12, 0.0);
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 12; ++j)
      for (int k = 0; k < 4; ++k) m[i * 12 + j] += a[i * 4 + k] * b[k * 12 + j];
  skip_plain_iterations(state, [&] { reduce(state, {{24, 12}}, m); });
  for (int step = 0; step < 3; ++step) {
    const std::vector<double> got = reduce(state, {{24, 12}}, m);
    for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(got[i], m[i], 1e-4 * (1 + std::abs(m[i]))) << step << " " << i;
  }
}

TEST_F(PowerSGD, AtFullRankSeveralMatricesOfOneBucketPassUnchanged) {
  // Each matrix has its own P and Q at its own offsets in the flat buffers.
  PowerSGDState state(compress_from_the_start(64));
  const std::vector<Shape> shapes = {{3, 16}, {5}, {16, 24}, {24, 12}};
  const std::vector<double> m = random_values(48 + 5 + 384 + 288, 8);
  skip_plain_iterations(state, [&] { reduce(state, shapes, m); });
  const std::vector<double> got = reduce(state, shapes, m);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(got[i], m[i], 1e-4 * (1 + std::abs(m[i]))) << i;
}

TEST_F(PowerSGD, ALowRankApproximationChangesAFullRankGradient) {
  PowerSGDState state(compress_from_the_start(1));
  const std::vector<double> m = random_values(35, 2);
  skip_plain_iterations(state, [&] { reduce(state, {{5, 7}}, m); });
  const std::vector<double> got = reduce(state, {{5, 7}}, m);
  double diff = 0;
  for (size_t i = 0; i < m.size(); ++i) diff += std::abs(got[i] - m[i]);
  EXPECT_GT(diff, 1e-2);  // a rank-1 result cannot equal a random 5 x 7 matrix
}

TEST_F(PowerSGD, ErrorFeedbackLosesNothingOverSteps) {
  // Applied at step t: A_t = C(g_t + e_{t-1}); e_t = g_t + e_{t-1} - A_t. Summed:
  // sum A_t + e_T = sum g_t, whatever C does.
  PowerSGDState state(compress_from_the_start(1));
  skip_plain_iterations(state, [&] { reduce(state, {{4, 6}}, random_values(24, 99)); });
  std::vector<double> applied(24, 0.0), given(24, 0.0), last;
  for (unsigned t = 0; t < 6; ++t) {
    const std::vector<double> g = random_values(24, 10 + t);
    last = reduce(state, {{4, 6}}, g);
    for (size_t i = 0; i < g.size(); ++i) applied[i] += last[i], given[i] += g[i];
  }
  const std::vector<double> owed = state.error(0).to_double_vector();  // e_T
  for (size_t i = 0; i < given.size(); ++i) EXPECT_NEAR(applied[i] + owed[i], given[i], 1e-5) << i;
  double first_error = 0;
  for (size_t i = 0; i < given.size(); ++i) first_error += std::abs(applied[i] - given[i]);
  EXPECT_GT(first_error, 1e-2);  // compression did lose something at first: the test can fail
}

TEST_F(PowerSGD, VectorsAndSmallMatricesTravelExactlyAndTheCountsFollowTheFormula) {
  PowerSGDOptions o;  // min_compression_rate 2, rank 1
  o.start_powerSGD_iter = 2;
  PowerSGDState state(o);
  // [16, 16] is compressed ((16 + 16) * 1 * 2 < 256); [3] (a vector) and [2, 2] ((2 + 2) * 2 >= 4) are not.
  const std::vector<Shape> shapes = {{16, 16}, {3}, {2, 2}};
  const std::vector<double> g = random_values(256 + 3 + 4, 5);
  skip_plain_iterations(state, [&] { reduce(state, shapes, g); });
  const int64_t before = state.numel_before_compression(), after = state.numel_after_compression();
  const std::vector<double> got = reduce(state, shapes, g);
  for (size_t i = 256; i < g.size(); ++i) EXPECT_NEAR(got[i], g[i], 1e-6) << "exact element " << i;
  EXPECT_EQ(state.numel_before_compression() - before, 263);
  EXPECT_EQ(state.numel_after_compression() - after, 3 + 4 + (16 + 16) * 1);
}

TEST_F(PowerSGD, WarmStartKeepsImprovingTheApproximationOfAFixedGradient) {
  // Power iteration: with Q carried over, a fixed M's rank-1 approximation
  // converges to its best one (the top singular pair); error feedback off.
  PowerSGDOptions o = compress_from_the_start(1);
  o.use_error_feedback = false;
  PowerSGDState state(o);
  const std::vector<double> m = random_values(30, 7);
  skip_plain_iterations(state, [&] { reduce(state, {{5, 6}}, m); });
  auto residual = [&](const std::vector<double>& a) {
    double s = 0;
    for (size_t i = 0; i < m.size(); ++i) s += (a[i] - m[i]) * (a[i] - m[i]);
    return s;
  };
  const double first = residual(reduce(state, {{5, 6}}, m));
  double later = first;
  for (int k = 0; k < 30; ++k) later = residual(reduce(state, {{5, 6}}, m));
  EXPECT_LT(later, first - 1e-6);
}

TEST(PowerSGDOptions, OutOfRangeValuesAreErrorsNamingTheOption) {
  auto message = [](PowerSGDOptions o) {
    try {
      PowerSGDState s(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  PowerSGDOptions o;
  o.matrix_approximation_rank = 0;
  EXPECT_NE(message(o).find("matrix_approximation_rank"), std::string::npos);
  o = {};
  o.start_powerSGD_iter = 1;
  EXPECT_NE(message(o).find("start_powerSGD_iter must be > 1"), std::string::npos);
  o.use_error_feedback = o.warm_start = false;
  EXPECT_EQ(message(o), "");
  o = {};
  o.min_compression_rate = -1;
  EXPECT_NE(message(o).find("min_compression_rate"), std::string::npos);
}

TEST_F(PowerSGD, WithoutItsStateTheHookIsAnError) {
  GradBucket b;
  b.buffer = Tensor::zeros({4});
  b.parameters = {Tensor::zeros({4})};
  b.offsets = {0};
  try {
    hook_(nullptr, *group_, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PowerSGDState"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::ddp
