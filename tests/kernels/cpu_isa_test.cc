// The per-ISA CPU kernels (kernels/cpu/isa/): the baseline copy against
// formulas evaluated in f64, every wider copy this CPU can run against the
// baseline copy, and thread-count independence of the results.
//
// Tolerances. A dot product of k terms in f32, summed in any order, is within
// k * u * sum|a_i b_i| of the exact value (u = 2^-24; Higham, Accuracy and
// Stability, 3.1), so two valid orders differ by at most twice that: GEMMs
// and row reductions are checked against 2 k u sum|a b| (+ a few ulp of the
// result for the final rounding). Elementwise functions (erf, tanh, exp from
// Eigen's vectorised polynomials, accurate to a few ulp) get a few ulp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cpu_isa.h"
#include "core/philox.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa/cpu_kernels.h"
#include "kernels/dropout_mask.h"

namespace tandem::kernels {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // f32 unit roundoff

std::vector<float> randoms(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

const CpuKernels& baseline() { return *cpu_kernels_for(CpuIsa::Baseline); }

// The wider levels this CPU runs; a level it lacks is skipped by name.
std::vector<const CpuKernels*> wider_levels() {
  std::vector<const CpuKernels*> out;
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512})
    if (const CpuKernels* k = cpu_kernels_for(isa)) out.push_back(k);
  return out;
}

#define FOR_EACH_WIDER_LEVEL(k)                                                  \
  if (wider_levels().empty()) {                                                  \
    GTEST_SKIP() << "this CPU has no AVX2/AVX-512: only baseline runs";          \
  }                                                                              \
  for (const CpuKernels* k : wider_levels())

// ---- GEMM

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

// op(A) op(B) with A, B stored with leading dimensions larger than needed (strided views).
struct GemmData {
  GemmCase c;
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c0;
  explicit GemmData(GemmCase g) : c(g) {
    const int64_t ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k;
    const int64_t br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    lda = ac + 3;
    ldb = bc + 5;
    ldc = g.n + 2;
    a = randoms(static_cast<size_t>(ar * lda), 1);
    b = randoms(static_cast<size_t>(br * ldb), 2);
    c0 = randoms(static_cast<size_t>(g.m * ldc), 3);
  }
  double A(int64_t i, int64_t p) const { return c.ta ? a[p * lda + i] : a[i * lda + p]; }
  double B(int64_t p, int64_t j) const { return c.tb ? b[j * ldb + p] : b[p * ldb + j]; }
  std::vector<float> run(const CpuKernels& k) const {
    std::vector<float> out = c0;
    k.gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, out.data(), ldc);
    return out;
  }
  // |got - exact| for every element of C within the dot-product bound; the padding columns untouched.
  void expect_close_to_exact(const std::vector<float>& got, double orders) const {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t at = static_cast<size_t>(i * ldc + j);
        if (j >= c.n) {
          ASSERT_EQ(got[at], c0[at]) << "wrote outside C at " << i << "," << j;
          continue;
        }
        double exact = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          exact += A(i, p) * B(p, j);
          mag += std::abs(A(i, p) * B(p, j));
        }
        exact = c.alpha * exact + (c.beta == 0.0f ? 0.0 : c.beta * c0[at]);
        mag = std::abs(c.alpha) * mag + std::abs(c.beta * c0[at]);
        const double tol = orders * (static_cast<double>(c.k) + 2) * kU * mag + 4 * kU * std::abs(exact);
        ASSERT_LE(std::abs(got[at] - exact), tol) << "C(" << i << "," << j << ") of " << c.m << "x" << c.n << "x"
                                                  << c.k << " ta=" << c.ta << " tb=" << c.tb;
      }
    }
  }
};

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({ta, tb, 37, 19, 23, 1.0f, 0.0f});    // odd sizes: every vector tail
      out.push_back({ta, tb, 300, 40, 64, 0.5f, 1.0f});   // several row blocks, accumulate into C
      out.push_back({ta, tb, 5, 3, 200, 1.0f, 0.25f});    // long dot products, scaled C
    }
  return out;
}

TEST(CpuIsaGemm, BaselineMatchesTheExactProductWithinTheDotProductBound) {
  for (const GemmCase& g : gemm_cases()) {
    GemmData d(g);
    d.expect_close_to_exact(d.run(baseline()), 1.0);
  }
}

TEST(CpuIsaGemm, BetaZeroIgnoresNanInTheOutput) {
  GemmData d({false, true, 33, 17, 9, 1.0f, 0.0f});
  std::fill(d.c0.begin(), d.c0.end(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> out = d.run(baseline());
  for (int64_t i = 0; i < 33; ++i)
    for (int64_t j = 0; j < 17; ++j) ASSERT_FALSE(std::isnan(out[static_cast<size_t>(i * d.ldc + j)]));
}

TEST(CpuIsaGemm, EveryWiderLevelAgreesWithBaselineWithinTwiceTheBound) {
  FOR_EACH_WIDER_LEVEL(k) {
    SCOPED_TRACE(cpu_isa_name(k->isa));
    for (const GemmCase& g : gemm_cases()) {
      GemmData d(g);
      d.expect_close_to_exact(d.run(*k), 1.0);
      std::vector<float> base = d.run(baseline()), wide = d.run(*k);
      for (size_t i = 0; i < base.size(); ++i)
        ASSERT_NEAR(wide[i], base[i], 2 * (g.k + 2) * kU * 4.0 * (1 + std::abs(base[i])));
    }
  }
}

// ---- row kernels: baseline against f64 formulas

constexpr int64_t kRows = 150, kDim = 72;  // several reduction blocks of 64 rows, a dim that is no power of 2

TEST(CpuIsaLayerNorm, BaselineForwardMatchesTheDefinition) {
  const auto x = randoms(kRows * kDim, 4, -3, 5), w = randoms(kDim, 5), b = randoms(kDim, 6);
  std::vector<float> y(x.size()), mean(kRows), rstd(kRows);
  baseline().layer_norm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), kRows, kDim, 1e-5f);
  for (int64_t r = 0; r < kRows; ++r) {
    double mu = 0, var = 0;
    for (int64_t d = 0; d < kDim; ++d) mu += x[r * kDim + d] / double(kDim);
    for (int64_t d = 0; d < kDim; ++d) var += std::pow(x[r * kDim + d] - mu, 2) / double(kDim);
    const double rs = 1 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(mean[r], mu, 1e-5);
    EXPECT_NEAR(rstd[r], rs, 1e-5 * rs);
    for (int64_t d = 0; d < kDim; ++d)
      ASSERT_NEAR(y[r * kDim + d], (x[r * kDim + d] - mu) * rs * w[d] + b[d], 2e-5);
  }
}

TEST(CpuIsaLayerNorm, BaselineBackwardMatchesTheDefinition) {
  const auto x = randoms(kRows * kDim, 7), w = randoms(kDim, 8), b = randoms(kDim, 9), dy = randoms(kRows * kDim, 10);
  std::vector<float> y(x.size()), mean(kRows), rstd(kRows), dx(x.size()), dw(kDim), db(kDim);
  baseline().layer_norm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), kRows, kDim, 1e-5f);
  baseline().layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                                 db.data(), kRows, kDim);
  std::vector<double> edw(kDim, 0), edb(kDim, 0);
  for (int64_t r = 0; r < kRows; ++r) {
    double mu = mean[r], rs = rstd[r], mg = 0, mgx = 0;
    for (int64_t d = 0; d < kDim; ++d) {
      const double g = dy[r * kDim + d] * double(w[d]), xh = (x[r * kDim + d] - mu) * rs;
      mg += g / kDim;
      mgx += g * xh / kDim;
      edw[d] += dy[r * kDim + d] * xh;
      edb[d] += dy[r * kDim + d];
    }
    for (int64_t d = 0; d < kDim; ++d) {
      const double g = dy[r * kDim + d] * double(w[d]), xh = (x[r * kDim + d] - mu) * rs;
      ASSERT_NEAR(dx[r * kDim + d], rs * (g - mg - xh * mgx), 1e-4);
    }
  }
  for (int64_t d = 0; d < kDim; ++d) {
    EXPECT_NEAR(dw[d], edw[d], 2 * kRows * kU * 10);
    EXPECT_NEAR(db[d], edb[d], 2 * kRows * kU * 10);
  }
}

double gelu_exact(double u) { return 0.5 * u * (1 + std::erf(u / std::sqrt(2.0))); }
double gelu_tanh(double u) { return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))); }

TEST(CpuIsaGelu, BaselineBiasGeluMatchesBothFormulas) {
  const auto x = randoms(kRows * kDim, 11, -6, 6), bias = randoms(kDim, 12);
  for (auto approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    std::vector<float> y(x.size());
    baseline().bias_gelu_forward(x.data(), bias.data(), y.data(), kRows, kDim, approx);
    for (int64_t i = 0; i < kRows * kDim; ++i) {
      const double u = double(x[i]) + bias[i % kDim];
      const double e = approx == GeluApproximation::Tanh ? gelu_tanh(u) : gelu_exact(u);
      ASSERT_NEAR(y[i], e, 1e-6 + 8 * kU * std::abs(e)) << "u = " << u;
    }
  }
}

TEST(CpuIsaGelu, BaselineBackwardMatchesTheDerivativeAndItsColumnSum) {
  const auto x = randoms(kRows * kDim, 13, -6, 6), bias = randoms(kDim, 14), dy = randoms(kRows * kDim, 15);
  for (auto approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    std::vector<float> dx(x.size()), db(kDim);
    baseline().bias_gelu_backward(dy.data(), x.data(), bias.data(), dx.data(), db.data(), kRows, kDim, approx);
    std::vector<double> edb(kDim, 0);
    for (int64_t i = 0; i < kRows * kDim; ++i) {
      const double u = double(x[i]) + bias[i % kDim], h = 1e-4;
      const double f = approx == GeluApproximation::Tanh ? (gelu_tanh(u + h) - gelu_tanh(u - h)) / (2 * h)
                                                         : (gelu_exact(u + h) - gelu_exact(u - h)) / (2 * h);
      ASSERT_NEAR(dx[i], dy[i] * f, 1e-5) << "u = " << u;
      edb[i % kDim] += dy[i] * f;
    }
    for (int64_t d = 0; d < kDim; ++d) EXPECT_NEAR(db[d], edb[d], 1e-4);
  }
}

TEST(CpuIsaReduce, BaselineColumnSumMatchesTheSum) {
  const auto x = randoms(kRows * kDim, 16);
  std::vector<float> out(kDim);
  baseline().column_sum(x.data(), kRows, kDim, out.data());
  for (int64_t d = 0; d < kDim; ++d) {
    double e = 0;
    for (int64_t r = 0; r < kRows; ++r) e += x[r * kDim + d];
    EXPECT_NEAR(out[d], e, 2 * kRows * kU * kRows);
  }
}

TEST(CpuIsaDropout, FactorsFollowThePhiloxRuleOfDropoutMask) {
  const uint32_t t = dropout_threshold(0.3f);
  const float scale = dropout_keep_scale(t);
  for (uint64_t first : {uint64_t{0}, uint64_t{7}, (uint64_t{1} << 32) - 3}) {  // a block counter crossing 2^32
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{131}, int64_t{1000}}) {
      std::vector<float> f(static_cast<size_t>(n));
      baseline().dropout_factors(42, 9, first, n, t, scale, f.data());
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(f[j], dropout_keep(42, 9, first * 8 + static_cast<uint64_t>(j), t) ? scale : 0.0f)
            << "first block " << first << " element " << j;
    }
  }
}

TEST(CpuIsaDropout, EveryLevelKeepsAUniformEqualToTheThresholdAndDropsOneBelow) {
  // Element 77's own 16-bit uniform u as the threshold (kept: >=), u + 1 (dropped), and the ends.
  const Philox4 block = philox_block(42, 9, 5 + 77 / 8);
  const uint32_t u77 = (block.v[77 % 8 / 2] >> (16 * (77 % 2))) & 0xffffu;
  std::vector<const CpuKernels*> levels = {&baseline()};
  for (const CpuKernels* k : wider_levels()) levels.push_back(k);
  for (const CpuKernels* k : levels) {
    for (uint32_t t : {u77, u77 + 1, 0u, 1u, 19661u, 32769u, 65535u, 65536u}) {
      std::vector<float> f(333);
      k->dropout_factors(42, 9, 5, static_cast<int64_t>(f.size()), t, 2.0f, f.data());
      for (size_t j = 0; j < f.size(); ++j)
        ASSERT_EQ(f[j], dropout_keep(42, 9, 5 * 8 + j, t) ? 2.0f : 0.0f)
            << cpu_isa_name(k->isa) << " threshold " << t << " element " << j;
      if (t == u77) {
        EXPECT_EQ(f[77], 2.0f) << "a uniform equal to the threshold is kept";
      } else if (t == u77 + 1) {
        EXPECT_EQ(f[77], 0.0f) << "a uniform just below the threshold is dropped";
      } else if (t == 65536u) {
        EXPECT_EQ(std::count(f.begin(), f.end(), 0.0f), 333) << "2^16 keeps nothing";
      }
    }
  }
}

TEST(CpuIsaDropout, PhiloxBlocksAreThoseOfCorePhilox) {
  for (uint64_t first : {uint64_t{0}, uint64_t{7}, (uint64_t{1} << 32) - 3}) {  // a block counter crossing 2^32
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{33}}) {
      std::vector<uint32_t> words(static_cast<size_t>(4 * n));
      baseline().philox_blocks(42, (uint64_t{5} << 32) + 9, first, n, words.data());
      for (int64_t b = 0; b < n; ++b) {
        const Philox4 r = philox_block(42, (uint64_t{5} << 32) + 9, first + static_cast<uint64_t>(b));
        for (int w = 0; w < 4; ++w) ASSERT_EQ(words[w * n + b], r.v[w]) << "first " << first << " block " << b;
      }
    }
  }
}

// Softmax rows with padded keys; a row of scores with ld > cols.
TEST(CpuIsaSoftmax, BaselineMaskedSoftmaxMatchesTheDefinitionAndPaddingGetsZero) {
  const int64_t rows = 5, cols = 37, ld = 40;
  auto s = randoms(rows * ld, 17, -8, 8);
  const auto orig = s;
  std::vector<uint8_t> real(cols);
  for (int64_t j = 0; j < cols; ++j) real[j] = j % 3 != 1;
  std::vector<float> lse(rows);
  baseline().masked_softmax_rows(s.data(), ld, rows, cols, real.data(), lse.data());
  for (int64_t i = 0; i < rows; ++i) {
    double m = -1e30, l = 0;
    for (int64_t j = 0; j < cols; ++j)
      if (real[j]) m = std::max<double>(m, orig[i * ld + j]);
    for (int64_t j = 0; j < cols; ++j)
      if (real[j]) l += std::exp(orig[i * ld + j] - m);
    EXPECT_NEAR(lse[i], m + std::log(l), 1e-5);
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_NEAR(s[i * ld + j], real[j] ? std::exp(orig[i * ld + j] - m) / l : 0.0, 1e-6);
    for (int64_t j = cols; j < ld; ++j) ASSERT_EQ(s[i * ld + j], orig[i * ld + j]);
  }
  // The same probabilities again from lse; then all keys padded: zero rows and lse = +inf.
  auto again = orig;
  baseline().softmax_from_lse_rows(again.data(), ld, rows, cols, real.data(), lse.data());
  for (int64_t i = 0; i < rows * ld; ++i) {
    if (i % ld >= cols) continue;
    ASSERT_NEAR(again[i], s[i], 1e-6) << "element " << i;
  }
  std::vector<uint8_t> none(cols, 0);
  auto padded = orig;
  baseline().masked_softmax_rows(padded.data(), ld, rows, cols, none.data(), lse.data());
  for (int64_t i = 0; i < rows; ++i) {
    EXPECT_EQ(lse[i], std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(padded[i * ld + j], 0.0f);
  }
}

TEST(CpuIsaSoftmax, BaselineBackwardIsPTimesDpMinusItsRowDot) {
  const int64_t rows = 4, cols = 29;
  auto p = randoms(rows * cols, 18, 0, 1), dp = randoms(rows * cols, 19);
  const auto dp0 = dp;
  baseline().softmax_backward_rows(p.data(), dp.data(), cols, rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < cols; ++j) dot += double(p[i * cols + j]) * dp0[i * cols + j];
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_NEAR(dp[i * cols + j], p[i * cols + j] * (dp0[i * cols + j] - dot), 1e-6);
  }
}

// ---- every wider level against baseline, kernel by kernel

void expect_near_rel(const std::vector<float>& got, const std::vector<float>& ref, double rel, double abs,
                     const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], abs + rel * std::abs(ref[i])) << what << " element " << i;
}

TEST(CpuIsaLevels, RowKernelsAgreeWithBaseline) {
  FOR_EACH_WIDER_LEVEL(k) {
    SCOPED_TRACE(cpu_isa_name(k->isa));
    const auto x = randoms(kRows * kDim, 20, -4, 4), w = randoms(kDim, 21), b = randoms(kDim, 22),
               dy = randoms(kRows * kDim, 23);
    // Row reductions of kDim terms: 2 kDim u relative to the magnitudes involved (O(1) here).
    const double red = 2.0 * kDim * kU * 8;
    auto ln = [&](const CpuKernels& t) {
      std::vector<float> y(x.size()), mean(kRows), rstd(kRows), dx(x.size()), dw(kDim), db(kDim);
      t.layer_norm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), kRows, kDim, 1e-5f);
      t.layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(), db.data(),
                            kRows, kDim);
      return std::vector<std::vector<float>>{y, mean, rstd, dx, dw, db};
    };
    const auto lb = ln(baseline()), lw = ln(*k);
    for (size_t i = 0; i < lb.size(); ++i) expect_near_rel(lw[i], lb[i], red, red * (i >= 4 ? kRows : 1), "layer_norm");
    for (auto approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
      auto gelu = [&](const CpuKernels& t) {
        std::vector<float> y(x.size()), dx(x.size()), db(kDim);
        t.bias_gelu_forward(x.data(), b.data(), y.data(), kRows, kDim, approx);
        t.bias_gelu_backward(dy.data(), x.data(), b.data(), dx.data(), db.data(), kRows, kDim, approx);
        return std::vector<std::vector<float>>{y, dx, db};
      };
      const auto gb = gelu(baseline()), gw = gelu(*k);
      // Same polynomials, FMA-contracted in the wide copies: erf/tanh/exp agree to a few ulp of
      // their values (O(1)), which the formulas scale by their other factors: u/2 in the
      // forward; dy (1 + |u| + |u|^3 / 5) bounds the factors of the derivative's terms.
      for (int64_t i = 0; i < kRows * kDim; ++i) {
        const double u = std::abs(double(x[i]) + b[i % kDim]);
        ASSERT_NEAR(gw[0][i], gb[0][i], 8 * kU * (1 + u)) << "gelu at u = " << u;
        ASSERT_NEAR(gw[1][i], gb[1][i], 8 * kU * std::abs(dy[i]) * (1 + u + u * u * u / 5)) << "gelu' at u = " << u;
      }
      expect_near_rel(gw[2], gb[2], 0, 2.0 * kRows * kU * 40, "gelu bias gradient");
    }
    std::vector<float> cb(kDim), cw(kDim);
    baseline().column_sum(x.data(), kRows, kDim, cb.data());
    k->column_sum(x.data(), kRows, kDim, cw.data());
    expect_near_rel(cw, cb, 0, 2.0 * kRows * kU * 4 * kRows, "column_sum");
  }
}

TEST(CpuIsaLevels, DropoutFactorsAreBitIdenticalToBaseline) {
  FOR_EACH_WIDER_LEVEL(k) {
    std::vector<float> fb(1000), fw(1000);
    const uint32_t t = dropout_threshold(0.1f);
    baseline().dropout_factors(7, 3, 11, 1000, t, dropout_keep_scale(t), fb.data());
    k->dropout_factors(7, 3, 11, 1000, t, dropout_keep_scale(t), fw.data());
    EXPECT_EQ(fw, fb) << cpu_isa_name(k->isa);
  }
}

TEST(CpuIsaLevels, PhiloxBlocksAreBitIdenticalToBaseline) {
  FOR_EACH_WIDER_LEVEL(k) {
    std::vector<uint32_t> wb(4 * 250), ww(wb.size());
    baseline().philox_blocks(7, 3, 11, 250, wb.data());
    k->philox_blocks(7, 3, 11, 250, ww.data());
    EXPECT_EQ(ww, wb) << cpu_isa_name(k->isa);
  }
}

TEST(CpuIsaLevels, SoftmaxKernelsAgreeWithBaseline) {
  FOR_EACH_WIDER_LEVEL(k) {
    SCOPED_TRACE(cpu_isa_name(k->isa));
    const int64_t rows = 9, cols = 45;
    const auto s = randoms(rows * cols, 24, -8, 8), dp = randoms(rows * cols, 25);
    std::vector<uint8_t> real(cols);
    for (int64_t j = 0; j < cols; ++j) real[j] = j % 4 != 0;
    auto run = [&](const CpuKernels& t) {
      auto p = s, q = s, d = dp;
      std::vector<float> lse(rows);
      t.masked_softmax_rows(p.data(), cols, rows, cols, real.data(), lse.data());
      t.softmax_from_lse_rows(q.data(), cols, rows, cols, real.data(), lse.data());
      t.softmax_backward_rows(p.data(), d.data(), cols, rows, cols);
      return std::vector<std::vector<float>>{p, q, d, lse};
    };
    const auto b = run(baseline()), w = run(*k);
    for (size_t i = 0; i < b.size(); ++i) expect_near_rel(w[i], b[i], 2.0 * cols * kU * 8, 1e-7, "softmax");
  }
}

// ---- thread-count independence

TEST(CpuIsaThreads, ResultsAreBitIdenticalForOneAndManyThreads) {
  const int before = intra_op_threads();
  const CpuKernels& k = cpu_kernels();
  const auto x = randoms(700 * 96, 26), w = randoms(96 * 80, 27), dy = randoms(700 * 96, 28), g = randoms(96, 29),
             b = randoms(96, 30);
  auto run = [&] {
    std::vector<float> y(700 * 80), dw(80 * 96), ln(x.size()), mean(700), rstd(700), dx(x.size()), dg(96), dbb(96),
        gx(x.size()), gdb(96);
    k.gemm(false, true, 700, 80, 96, 1.0f, x.data(), 96, w.data(), 96, 0.0f, y.data(), 80);
    k.gemm(true, false, 96, 80, 700, 1.0f, dy.data(), 96, y.data(), 80, 0.0f, dw.data(), 80);
    k.layer_norm_forward(x.data(), g.data(), b.data(), ln.data(), mean.data(), rstd.data(), 700, 96, 1e-5f);
    k.layer_norm_backward(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(), dg.data(), dbb.data(),
                          700, 96);
    k.bias_gelu_backward(dy.data(), x.data(), b.data(), gx.data(), gdb.data(), 700, 96, GeluApproximation::None);
    return std::vector<std::vector<float>>{y, dw, ln, dx, dg, dbb, gx, gdb};
  };
  set_intra_op_threads(1);
  const auto one = run();
  for (int threads : {2, 3, 7}) {
    set_intra_op_threads(threads);
    EXPECT_EQ(run(), one) << threads << " threads";
  }
  set_intra_op_threads(before);
}

// ---- choosing the level

TEST(CpuIsaChoice, BaselineCanAlwaysBeForced) {
  EXPECT_EQ(choose_cpu_isa("baseline"), CpuIsa::Baseline);
  ASSERT_NE(cpu_kernels_for(CpuIsa::Baseline), nullptr);
  EXPECT_EQ(cpu_kernels_for(CpuIsa::Baseline)->isa, CpuIsa::Baseline);
}

TEST(CpuIsaChoice, UnsetMeansTheBestLevelTheCpuSupports) {
  EXPECT_EQ(choose_cpu_isa(nullptr), best_cpu_isa());
  EXPECT_EQ(choose_cpu_isa(""), best_cpu_isa());
  EXPECT_TRUE(cpu_supports(best_cpu_isa()));
}

TEST(CpuIsaChoice, UnknownNameIsAnErrorNamingTheVariable) {
  try {
    choose_cpu_isa("sse9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_CPU_ISA=sse9"), std::string::npos) << e.what();
  }
}

TEST(CpuIsaChoice, ALevelTheCpuLacksIsAnErrorNotAFallback) {
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (cpu_supports(isa)) continue;
    EXPECT_THROW(choose_cpu_isa(cpu_isa_name(isa)), Error) << cpu_isa_name(isa);
    EXPECT_EQ(cpu_kernels_for(isa), nullptr);
    return;
  }
  GTEST_SKIP() << "this CPU supports every level";
}

TEST(CpuIsaChoice, TheSelectedTableIsTheEnvironmentsChoice) {
  EXPECT_EQ(cpu_kernels().isa, choose_cpu_isa(std::getenv("TANDEM_CPU_ISA")));
}

}  // namespace
}  // namespace tandem::kernels
