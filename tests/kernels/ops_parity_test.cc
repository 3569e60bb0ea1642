// Every transformer-op CUDA kernel against its CPU reference, forward and
// backward, in f32, bf16 and f16, at odd sizes: sequence 1, 7, 129, 512; widths
// that are not multiples of 32 (and some not multiples of the 16-byte vector,
// which take the scalar kernels); batch 1. Skipped where no GPU is present.
//
// Tolerances (as tests/kernels/cuda_parity_test.cc): f32 results differ from
// the CPU only by summation order and by 1-2 ulp in erff/expf/tanhf: atol
// 1e-4, rtol 1e-4 (column sums over up to 512 rows: atol 1e-3). 16-bit results
// are both rounded from f32 values that agree to ~1e-6, so they differ by at
// most one ulp: bf16 atol 2e-2, rtol 1e-2 (ulp 2^-8 relative); f16 atol 2e-3,
// rtol 2e-3 (ulp 2^-11). Dropout masks, accuracy counts and plain dropout
// outputs must agree exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"
#include "core/stream.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/index_errors.h"
#include "kernels/layer_norm.h"
#include "kernels/pooling.h"
#include "kernels/tfidf_weights.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::random_tensor;

struct Tol {
  double atol, rtol;
};

Tol tolerance(DType t, double f32_atol = 1e-4) {
  switch (t) {
    case DType::BF16: return {2e-2, 1e-2};
    case DType::F16: return {2e-3, 2e-3};
    default: return {f32_atol, 1e-4};
  }
}

Tensor on_gpu(const Tensor& c) {
  Tensor g = c.detach().to(Device::cuda(0));
  if (c.requires_grad()) g.set_requires_grad(true);
  return g;
}

Tensor ids_tensor(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed, DType t) {
  // Zipf-like: half of the ids are 0, so id 0 forms segments far longer than a 64-row piece.
  Tensor u = Tensor::empty({batch, seq});
  fill_uniform(u, seed, 0);
  std::vector<int64_t> ids;
  for (double v : u.to_double_vector())
    ids.push_back(v < 0.5 ? 0 : static_cast<int64_t>((v - 0.5) * 2 * static_cast<double>(vocab)) % vocab);
  return Tensor::from_vector(ids, {batch, seq}, t);
}

Tensor padding_mask(int64_t batch, int64_t seq) {
  // Row b keeps its first seq - b*seq/batch positions; the last row of a batch > 1 is all padding.
  std::vector<int64_t> m;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) m.push_back(batch > 1 && b == batch - 1 ? 0 : (s < seq - b * seq / batch ? 1 : 0));
  return Tensor::from_vector(m, {batch, seq}, DType::U8);
}

class OpsParity : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
  DType t() const { return GetParam(); }
  Tensor input(const Shape& s, uint64_t seed, bool grad = true) const {
    Tensor x = random_tensor(s, seed, t());
    return grad ? x.set_requires_grad(true) : x;
  }
  // Runs op on CPU inputs and GPU copies, backpropagates one random output
  // gradient through both, compares the outputs and every input gradient.
  void check(const std::function<Tensor(const std::vector<Tensor>&)>& op, const std::vector<Tensor>& cpu_in,
             Tol tol, Tol grad_tol) const {
    std::vector<Tensor> gpu_in;
    for (const Tensor& c : cpu_in) gpu_in.push_back(on_gpu(c));
    Tensor yc = op(cpu_in), yg = op(gpu_in);
    EXPECT_TRUE(all_close(yg, yc, tol.atol, tol.rtol)) << "forward";
    if (!yc.requires_grad()) return;
    Tensor dy = random_tensor(yc.shape(), 99, yc.dtype());
    yc.backward(dy);
    yg.backward(dy.to(Device::cuda(0)));
    for (size_t i = 0; i < cpu_in.size(); ++i) {
      if (!cpu_in[i].requires_grad()) continue;
      EXPECT_TRUE(all_close(gpu_in[i].grad(), cpu_in[i].grad(), grad_tol.atol, grad_tol.rtol))
          << "gradient of input " << i;
    }
  }
  void check(const std::function<Tensor(const std::vector<Tensor>&)>& op, const std::vector<Tensor>& cpu_in) const {
    check(op, cpu_in, tolerance(t()), tolerance(t(), 1e-3));
  }
};

// --- embedding -------------------------------------------------------------

TEST_P(OpsParity, EmbeddingAtOddSizes) {
  struct Case { int64_t batch, seq, dim, vocab, positions; };
  for (Case c : {Case{1, 1, 33, 5, 1}, Case{2, 7, 100, 11, 9}, Case{1, 129, 200, 300, 129}, Case{3, 512, 72, 50, 600}}) {
    Tensor ids = ids_tensor(c.batch, c.seq, c.vocab, static_cast<uint64_t>(c.seq), c.seq % 2 ? DType::I64 : DType::I32);
    check([&](const auto& in) { return embedding(ids.device() == in[0].device() ? ids : ids.to(in[0].device()), in[0], in[1]); },
          {input({c.vocab, c.dim}, 1), input({c.positions, c.dim}, 2)});
  }
}

TEST_P(OpsParity, EmbeddingBackwardIsBitwiseRepeatable) {
  Tensor ids = ids_tensor(8, 512, 1000, 3, DType::I64).to(Device::cuda(0));
  Tensor tok = random_tensor({1000, 128}, 4, t(), Device::cuda(0)).set_requires_grad(true);
  Tensor pos = random_tensor({512, 128}, 5, t(), Device::cuda(0)).set_requires_grad(true);
  Tensor dy = random_tensor({8, 512, 128}, 6, t(), Device::cuda(0));
  embedding(ids, tok, pos).backward(dy);
  std::vector<double> first = tok.grad().to_double_vector();
  for (int i = 0; i < 3; ++i) {
    tok.set_grad(Tensor());
    embedding(ids, tok, pos).backward(dy);
    ASSERT_EQ(tok.grad().to_double_vector(), first) << "run " << i;
  }
}

TEST_P(OpsParity, EmbeddingOutOfRangeIdIsReportedByTheGpu) {
  Tensor tok = random_tensor({4, 16}, 7, t(), Device::cuda(0)), pos = random_tensor({3, 16}, 8, t(), Device::cuda(0));
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 9, 1}, {2, 3}, DType::I64, Device::cuda(0));
  embedding(ids, tok, pos);
  cuda::device_synchronize();
  EXPECT_TRUE(testing::throws_error_containing([] { raise_pending_index_error(); },
                                               "embedding: token id 9 at flat position 4 is outside [0, 4)"));
  EXPECT_NO_THROW(raise_pending_index_error());  // reported once
}

// --- layer norm ------------------------------------------------------------

TEST_P(OpsParity, LayerNormAtOddSizes) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{1, 33}, Case{7, 100}, Case{129, 200}, Case{512, 768}, Case{3, 1}, Case{5, 4096}, Case{2, 520}}) {
    check([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
          {input({c.rows, c.dim}, 10), input({c.dim}, 11), input({c.dim}, 12)});
  }
}

TEST_P(OpsParity, LayerNormWithF32ParametersOnA3dInput) {
  Tensor w = random_tensor({200}, 13, DType::F32).set_requires_grad(true);
  Tensor b = random_tensor({200}, 14, DType::F32).set_requires_grad(true);
  check([](const auto& in) { return layer_norm(in[0], in[1], in[2]); }, {input({3, 43, 200}, 15), w, b});
}

TEST_P(OpsParity, LayerNormOnAnUnalignedView) {
  Tensor base = random_tensor({1 + 4 * 64}, 16, t());
  Tensor w = random_tensor({64}, 17, t()), b = random_tensor({64}, 18, t());
  Tensor yc = layer_norm(base.view_range(1, {4, 64}), w, b);
  Tensor gb = base.to(Device::cuda(0));
  Tensor yg = layer_norm(gb.view_range(1, {4, 64}), w.to(Device::cuda(0)), b.to(Device::cuda(0)));
  Tol tol = tolerance(t());
  EXPECT_TRUE(all_close(yg, yc, tol.atol, tol.rtol));
}

TEST_P(OpsParity, LayerNormParameterGradientsAreBitwiseRepeatable) {
  Tensor x = random_tensor({1000, 768}, 19, t(), Device::cuda(0));
  Tensor w = random_tensor({768}, 20, DType::F32, Device::cuda(0)).set_requires_grad(true);
  Tensor b = random_tensor({768}, 21, DType::F32, Device::cuda(0)).set_requires_grad(true);
  Tensor dy = random_tensor({1000, 768}, 22, t(), Device::cuda(0));
  layer_norm(x, w, b).backward(dy);
  std::vector<double> first = w.grad().to_double_vector();
  w.set_grad(Tensor());
  layer_norm(x, w, b).backward(dy);
  EXPECT_EQ(w.grad().to_double_vector(), first);
}

// --- GELU -------------------------------------------------------------------

TEST_P(OpsParity, GeluBothApproximations) {
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
    for (int64_t n : {1, 7, 4099, 129 * 100})
      check([a](const auto& in) { return gelu(in[0], a); }, {input({n}, 23)});
}

TEST_P(OpsParity, BiasGeluBothApproximations) {
  struct Case { int64_t rows, dim; };
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh})
    for (Case c : {Case{1, 33}, Case{7, 100}, Case{129, 200}, Case{512, 3072}})
      check([a](const auto& in) { return bias_gelu(in[0], in[1], a); }, {input({c.rows, c.dim}, 24), input({c.dim}, 25)});
}

// --- dropout, bias, residual -----------------------------------------------

TEST_P(OpsParity, DropoutMaskAndValuesAreIdentical) {
  for (int64_t n : {1, 7, 4099, 512 * 768}) {
    Tensor x = random_tensor({n}, 26, t());
    std::vector<double> c = dropout(x, 0.1, true, 77, 5).to_double_vector();
    std::vector<double> g = dropout(x.to(Device::cuda(0)), 0.1, true, 77, 5).to_double_vector();
    ASSERT_EQ(c, g) << n;
  }
}

TEST_P(OpsParity, DropoutBackwardAtOddSizes) {
  for (Shape s : {Shape{1, 1}, Shape{7, 33}, Shape{129, 100}})
    check([](const auto& in) { return dropout(in[0], 0.3, true, 5, 6); }, {input(s, 27)});
}

TEST_P(OpsParity, BiasDropoutAddAtOddSizes) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{1, 33}, Case{7, 100}, Case{129, 200}, Case{512, 768}}) {
    check([](const auto& in) { return bias_dropout_add(in[0], in[1], in[2], 0.1, true, 8, 9); },
          {input({c.rows, c.dim}, 28), input({c.dim}, 29), input({c.rows, c.dim}, 30)});
    check([](const auto& in) { return add_bias(in[0], in[1]); }, {input({c.rows, c.dim}, 31), input({c.dim}, 32)});
  }
}

// --- pooling ----------------------------------------------------------------

TEST_P(OpsParity, MaskedMeanPoolWithPadding) {
  struct Case { int64_t batch, seq, dim; };
  for (Case c : {Case{1, 1, 33}, Case{3, 7, 100}, Case{2, 129, 200}, Case{4, 512, 72}}) {
    Tensor mask = padding_mask(c.batch, c.seq);
    check([&](const auto& in) { return masked_mean_pool(in[0], mask.to(in[0].device())); },
          {input({c.batch, c.seq, c.dim}, 33)});
  }
}

TEST_P(OpsParity, WeightedSumPoolWithZeroWeights) {
  struct Case { int64_t batch, seq, dim; };
  for (Case c : {Case{1, 1, 33}, Case{3, 7, 100}, Case{2, 129, 200}, Case{4, 512, 72}}) {
    // Normal weights, zero where the padding mask is (the last row entirely).
    Tensor w = random_tensor({c.batch, c.seq}, 37, DType::F32);
    const std::vector<double> m = padding_mask(c.batch, c.seq).to_double_vector();
    std::vector<double> wv = w.to_double_vector();
    for (size_t i = 0; i < wv.size(); ++i) wv[i] *= m[i];
    w = Tensor::from_vector(wv, {c.batch, c.seq}, DType::F32);
    check([&](const auto& in) { return weighted_sum_pool(in[0], w.to(in[0].device())); },
          {input({c.batch, c.seq, c.dim}, 38)});
  }
}

// Not one of the dtype-parameterized tests: the weights are f32 whatever the compute dtype, and a
// bf16/f16 instance could only skip (which a GPU run, with TANDEM_REQUIRE_GPU=1, counts against it).
TEST(TfidfWeightsParity, WithCountsAndPadding) {
  TANDEM_REQUIRE_GPU();
  struct Case { int64_t batch, seq, vocab; };
  for (Case c : {Case{1, 1, 5}, Case{3, 7, 11}, Case{2, 300, 1000}, Case{5, 1024, 50}}) {
    Tensor ids = ids_tensor(c.batch, c.seq, c.vocab, static_cast<uint64_t>(c.seq), c.seq % 2 ? DType::I64 : DType::I32);
    // Counts 0..255 under the padding mask; idf in [0, 8), some exactly 0.
    Tensor u = Tensor::empty({c.batch, c.seq});
    fill_uniform(u, 39, 0, 0.0, 256.0);
    const std::vector<double> m = padding_mask(c.batch, c.seq).to_double_vector(), uv = u.to_double_vector();
    std::vector<int64_t> counts;
    for (size_t i = 0; i < uv.size(); ++i) counts.push_back(m[i] != 0 ? std::max<int64_t>(1, static_cast<int64_t>(uv[i])) : 0);
    Tensor mask = Tensor::from_vector(counts, {c.batch, c.seq}, DType::U8);
    Tensor idf = Tensor::empty({c.vocab});
    fill_uniform(idf, 40, 0, -1.0, 8.0);
    std::vector<double> iv = idf.to_double_vector();
    for (double& v : iv) v = std::max(v, 0.0);
    idf = Tensor::from_vector(iv, {c.vocab}, DType::F32);
    for (bool sublinear : {true, false}) {
      Tensor wc = tfidf_weights(ids, mask, idf, sublinear);
      Tensor wg = tfidf_weights(ids.to(Device::cuda(0)), mask.to(Device::cuda(0)), idf.to(Device::cuda(0)), sublinear);
      EXPECT_TRUE(all_close(wg, wc, 1e-6, 1e-5)) << "batch " << c.batch << " seq " << c.seq << " sublinear " << sublinear;
    }
  }
}

TEST_P(OpsParity, FirstTokenPool) {
  for (Shape s : {Shape{1, 1, 33}, Shape{3, 7, 100}, Shape{2, 129, 200}, Shape{4, 512, 72}})
    check([](const auto& in) { return first_token_pool(in[0]); }, {input(s, 34)});
}

// --- cross-entropy and accuracy ---------------------------------------------

TEST_P(OpsParity, CrossEntropyWithAndWithoutLabelSmoothing) {
  struct Case { int64_t n, classes; };
  for (double eps : {0.0, 0.1})
    for (Case c : {Case{1, 2}, Case{7, 33}, Case{129, 5}, Case{512, 100}}) {
      Tensor u = Tensor::empty({c.n});
      fill_uniform(u, 35, 0, 0.0, static_cast<double>(c.classes));
      std::vector<int64_t> y;
      for (double v : u.to_double_vector()) y.push_back(static_cast<int64_t>(v));
      Tensor labels = Tensor::from_vector(y, {c.n}, c.n % 2 ? DType::I64 : DType::I32);
      check([&](const auto& in) { return cross_entropy(in[0], labels.to(in[0].device()), eps); },
            {input({c.n, c.classes}, 36)}, Tol{1e-4, 1e-4}, tolerance(t()));
      EXPECT_EQ(accuracy_count(on_gpu(input({c.n, c.classes}, 36)), labels.to(Device::cuda(0))).item(),
                accuracy_count(input({c.n, c.classes}, 36), labels).item());
    }
}

TEST_P(OpsParity, ClassWeightedCrossEntropyWithAndWithoutLabelSmoothing) {
  struct Case { int64_t n, classes; };
  for (double eps : {0.0, 0.1})
    for (Case c : {Case{1, 2}, Case{7, 33}, Case{129, 5}, Case{512, 100}}) {
      Tensor u = Tensor::empty({c.n});
      fill_uniform(u, 38, 0, 0.0, static_cast<double>(c.classes));
      std::vector<int64_t> y;
      for (double v : u.to_double_vector()) y.push_back(static_cast<int64_t>(v));
      Tensor labels = Tensor::from_vector(y, {c.n}, c.n % 2 ? DType::I64 : DType::I32);
      Tensor w = Tensor::empty({c.classes});
      fill_uniform(w, 39, 0, 0.1, 4.0);
      check([&](const auto& in) {
        return cross_entropy(in[0], labels.to(in[0].device()), eps, w.to(in[0].device()));
      }, {input({c.n, c.classes}, 40)}, Tol{1e-4, 1e-4}, tolerance(t()));
    }
}

TEST_P(OpsParity, CrossEntropyOutOfRangeLabelIsReportedByTheGpu) {
  Tensor z = random_tensor({3, 4}, 37, t(), Device::cuda(0));
  cross_entropy(z, Tensor::from_vector(std::vector<int64_t>{0, 4, 1}, {3}, DType::I64, Device::cuda(0)));
  cuda::device_synchronize();
  EXPECT_TRUE(testing::throws_error_containing([] { raise_pending_index_error(); },
                                               "cross_entropy: label 4 at flat position 1 is outside [0, 4)"));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OpsParity, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem::kernels
