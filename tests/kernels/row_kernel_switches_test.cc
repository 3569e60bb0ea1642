// The switches of the memory-bound row kernels (kernels/cuda/row_kernel_switches.h):
// their parsing everywhere, and on a GPU each new kernel against the kernel it
// may replace, forward and backward, at sizes that take every code path:
// several rows per group and several rows in flight (d_model 256 in 16 bits,
// 768 in f32), one row per group (4096), the scalar kernels (widths that are
// no whole 16-byte vectors), parameters in f32 and in the data's type; for the
// masked mean, every lane-group count from 1 to 16 and padding; for the dropout
// backward, plain dropout and dropout + residual at widths with and without
// whole vectors; for the column sums' block walk, the three bias gradients
// (linear, bias_gelu, bias_dropout_add) at many and few rows; for the fused
// GELU + dropout, both walks at the FFN's width and at scalar widths, its keep decisions
// recomputed or saved, and its backward without a bias gradient (TANDEM_BIAS_GRADIENT=gemm's
// rows walk) against the column walk's; for the
// fused bias + dropout + residual + layer norm, each layer-norm kernel; for the
// embedding gradient's window walk, uniform ids and a padding id that fills most
// of the batch (one segment over hundreds of windows), out-of-range ids, widths
// with and without whole vectors.
//
// The masked mean, the dropout backward and the two fused epilogues must give exactly the default's
// bits: their per-element arithmetic is additions in a fixed order, a division
// and a product, which no compiler can reorder or fuse. The layer norm's rows
// see the same operations in the same order too, but a product followed by a
// sum may be fused into one FMA (PTX's plain mul/add allow it), and the
// unrolled multi-row code can be fused differently from the one-row code, as
// tests/kernels/attention_forward_pipelined_parity_test.cc found for the
// softmax: there the results are held to a few f32 roundings (a unit in the
// last place of a 16-bit output). The column sums' two walks add in different
// orders: the bias gradients agree to a rounding, the input gradients exactly. The CPU parity of the default kernels is
// tests/kernels/ops_parity_test.cc's. Skipped where no GPU is present
// (TANDEM_REQUIRE_GPU=1 makes that a failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/bias_dropout_add_layer_norm.h"
#include "kernels/bias_gradient.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/index_errors.h"
#include "kernels/layer_norm.h"
#include "kernels/linear.h"
#include "kernels/pooling.h"
#include "tests/testing/errors.h"
#include "tests/testing/gradcheck.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/row_kernel_switches.h"
#endif

namespace tandem::kernels {
namespace {

#if TANDEM_WITH_CUDA

using testing::random_tensor;
using testing::rejects_naming_variable_and_value;

TEST(LayerNormSwitch, IsOneRowUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_layer_norm_kernel(nullptr), LayerNormKernel::OneRow);
  EXPECT_EQ(parse_layer_norm_kernel(""), LayerNormKernel::OneRow);
  EXPECT_EQ(parse_layer_norm_kernel("one_row"), LayerNormKernel::OneRow);
  EXPECT_EQ(parse_layer_norm_kernel("multi_row"), LayerNormKernel::MultiRow);
  EXPECT_EQ(parse_layer_norm_kernel("lanes"), LayerNormKernel::Lanes);
  for (const char* bad : {"multi", "1", "Multi_Row", "multi_row ", "lane"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_layer_norm_kernel, "TANDEM_LAYER_NORM", bad));
}

TEST(MaskedMeanSwitch, IsOneBlockUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_masked_mean_kernel(nullptr), MaskedMeanKernel::OneBlock);
  EXPECT_EQ(parse_masked_mean_kernel(""), MaskedMeanKernel::OneBlock);
  EXPECT_EQ(parse_masked_mean_kernel("one_block"), MaskedMeanKernel::OneBlock);
  EXPECT_EQ(parse_masked_mean_kernel("lane_groups"), MaskedMeanKernel::LaneGroups);
  for (const char* bad : {"lanes", "0", "lane_groups\n"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_masked_mean_kernel, "TANDEM_MASKED_MEAN", bad));
}

TEST(DropoutBackwardSwitch, IsFlatUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_dropout_backward_kernel(nullptr), DropoutBackwardKernel::Flat);
  EXPECT_EQ(parse_dropout_backward_kernel(""), DropoutBackwardKernel::Flat);
  EXPECT_EQ(parse_dropout_backward_kernel("batched"), DropoutBackwardKernel::Batched);
  EXPECT_EQ(parse_dropout_backward_kernel("flat"), DropoutBackwardKernel::Flat);
  for (const char* bad : {"Flat", "one_row", " flat"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_dropout_backward_kernel, "TANDEM_DROPOUT_BACKWARD", bad));
}

TEST(ColumnSumSwitch, IsThreadUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_column_sum_kernel(nullptr), ColumnSumKernel::Thread);
  EXPECT_EQ(parse_column_sum_kernel(""), ColumnSumKernel::Thread);
  EXPECT_EQ(parse_column_sum_kernel("thread"), ColumnSumKernel::Thread);
  EXPECT_EQ(parse_column_sum_kernel("block"), ColumnSumKernel::Block);
  for (const char* bad : {"blocks", "1", "Block"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_column_sum_kernel, "TANDEM_COLUMN_SUM", bad));
}

TEST(GeluDropoutSwitch, IsFusedUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_gelu_dropout_kernel(nullptr), GeluDropoutKernel::Fused);
  EXPECT_EQ(parse_gelu_dropout_kernel(""), GeluDropoutKernel::Fused);
  EXPECT_EQ(parse_gelu_dropout_kernel("separate"), GeluDropoutKernel::Separate);
  EXPECT_EQ(parse_gelu_dropout_kernel("fused"), GeluDropoutKernel::Fused);
  for (const char* bad : {"fuse", "1", "Fused", "fused "})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_gelu_dropout_kernel, "TANDEM_GELU_DROPOUT", bad));
}

TEST(AddLayerNormSwitch, IsFusedUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_add_layer_norm_kernel(nullptr), AddLayerNormKernel::Fused);
  EXPECT_EQ(parse_add_layer_norm_kernel(""), AddLayerNormKernel::Fused);
  EXPECT_EQ(parse_add_layer_norm_kernel("separate"), AddLayerNormKernel::Separate);
  EXPECT_EQ(parse_add_layer_norm_kernel("fused"), AddLayerNormKernel::Fused);
  for (const char* bad : {"on", "FUSED", "fused,"})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_add_layer_norm_kernel, "TANDEM_ADD_LAYER_NORM", bad));
}

TEST(EmbeddingBackwardSwitch, IsWindowsUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_embedding_backward_kernel(nullptr), EmbeddingBackwardKernel::Windows);
  EXPECT_EQ(parse_embedding_backward_kernel(""), EmbeddingBackwardKernel::Windows);
  EXPECT_EQ(parse_embedding_backward_kernel("pieces"), EmbeddingBackwardKernel::Pieces);
  EXPECT_EQ(parse_embedding_backward_kernel("windows"), EmbeddingBackwardKernel::Windows);
  for (const char* bad : {"window", "1", "Windows", "windows "})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_embedding_backward_kernel, "TANDEM_EMBEDDING_BACKWARD", bad));
}

TEST(DropoutKeepSwitch, IsRecomputeUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(parse_dropout_keep(nullptr), DropoutKeep::Recompute);
  EXPECT_EQ(parse_dropout_keep(""), DropoutKeep::Recompute);
  EXPECT_EQ(parse_dropout_keep("recompute"), DropoutKeep::Recompute);
  EXPECT_EQ(parse_dropout_keep("saved"), DropoutKeep::Saved);
  for (const char* bad : {"save", "1", "Saved", "saved "})
    EXPECT_TRUE(rejects_naming_variable_and_value(parse_dropout_keep, "TANDEM_DROPOUT_KEEP", bad));
}

TEST(RowKernelSwitches, ATestOverrideWinsUntilItIsCleared) {
  const LayerNormKernel ln_env = parse_layer_norm_kernel(std::getenv("TANDEM_LAYER_NORM"));
  const MaskedMeanKernel mm_env = parse_masked_mean_kernel(std::getenv("TANDEM_MASKED_MEAN"));
  const DropoutBackwardKernel db_env = parse_dropout_backward_kernel(std::getenv("TANDEM_DROPOUT_BACKWARD"));
  const ColumnSumKernel cs_env = parse_column_sum_kernel(std::getenv("TANDEM_COLUMN_SUM"));
  const GeluDropoutKernel gd_env = parse_gelu_dropout_kernel(std::getenv("TANDEM_GELU_DROPOUT"));
  const AddLayerNormKernel aln_env = parse_add_layer_norm_kernel(std::getenv("TANDEM_ADD_LAYER_NORM"));
  const EmbeddingBackwardKernel eb_env = parse_embedding_backward_kernel(std::getenv("TANDEM_EMBEDDING_BACKWARD"));
  const DropoutKeep dk_env = parse_dropout_keep(std::getenv("TANDEM_DROPOUT_KEEP"));
  EXPECT_EQ(layer_norm_kernel(), ln_env);
  EXPECT_EQ(masked_mean_kernel(), mm_env);
  EXPECT_EQ(dropout_backward_kernel(), db_env);
  EXPECT_EQ(column_sum_kernel(), cs_env);
  EXPECT_EQ(gelu_dropout_kernel(), gd_env);
  EXPECT_EQ(add_layer_norm_kernel(), aln_env);
  EXPECT_EQ(embedding_backward_kernel(), eb_env);
  EXPECT_EQ(dropout_keep(), dk_env);
  for (DropoutKeep k : {DropoutKeep::Saved, DropoutKeep::Recompute}) {
    set_dropout_keep_for_testing(k);
    EXPECT_EQ(dropout_keep(), k);
  }
  for (EmbeddingBackwardKernel k : {EmbeddingBackwardKernel::Pieces, EmbeddingBackwardKernel::Windows}) {
    set_embedding_backward_kernel_for_testing(k);
    EXPECT_EQ(embedding_backward_kernel(), k);
  }
  for (AddLayerNormKernel k : {AddLayerNormKernel::Fused, AddLayerNormKernel::Separate}) {
    set_add_layer_norm_kernel_for_testing(k);
    EXPECT_EQ(add_layer_norm_kernel(), k);
  }
  for (GeluDropoutKernel k : {GeluDropoutKernel::Fused, GeluDropoutKernel::Separate}) {
    set_gelu_dropout_kernel_for_testing(k);
    EXPECT_EQ(gelu_dropout_kernel(), k);
  }
  for (ColumnSumKernel k : {ColumnSumKernel::Block, ColumnSumKernel::Thread}) {
    set_column_sum_kernel_for_testing(k);
    EXPECT_EQ(column_sum_kernel(), k);
  }
  for (LayerNormKernel k : {LayerNormKernel::MultiRow, LayerNormKernel::Lanes, LayerNormKernel::OneRow}) {
    set_layer_norm_kernel_for_testing(k);
    EXPECT_EQ(layer_norm_kernel(), k);
  }
  for (MaskedMeanKernel k : {MaskedMeanKernel::LaneGroups, MaskedMeanKernel::OneBlock}) {
    set_masked_mean_kernel_for_testing(k);
    EXPECT_EQ(masked_mean_kernel(), k);
  }
  for (DropoutBackwardKernel k : {DropoutBackwardKernel::Flat, DropoutBackwardKernel::Batched}) {
    set_dropout_backward_kernel_for_testing(k);
    EXPECT_EQ(dropout_backward_kernel(), k);
  }
  set_layer_norm_kernel_for_testing(std::nullopt);
  set_masked_mean_kernel_for_testing(std::nullopt);
  set_dropout_backward_kernel_for_testing(std::nullopt);
  set_column_sum_kernel_for_testing(std::nullopt);
  set_gelu_dropout_kernel_for_testing(std::nullopt);
  set_add_layer_norm_kernel_for_testing(std::nullopt);
  set_embedding_backward_kernel_for_testing(std::nullopt);
  set_dropout_keep_for_testing(std::nullopt);
  EXPECT_EQ(layer_norm_kernel(), ln_env);
  EXPECT_EQ(masked_mean_kernel(), mm_env);
  EXPECT_EQ(dropout_backward_kernel(), db_env);
  EXPECT_EQ(column_sum_kernel(), cs_env);
  EXPECT_EQ(gelu_dropout_kernel(), gd_env);
  EXPECT_EQ(add_layer_norm_kernel(), aln_env);
  EXPECT_EQ(embedding_backward_kernel(), eb_env);
  EXPECT_EQ(dropout_keep(), dk_env);
}

// What one run of an op gave: its output and every input gradient, as exact doubles.
using Results = std::vector<std::vector<double>>;

class NewRowKernels : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
  void TearDown() override {
    set_layer_norm_kernel_for_testing(std::nullopt);
    set_masked_mean_kernel_for_testing(std::nullopt);
    set_dropout_backward_kernel_for_testing(std::nullopt);
    set_column_sum_kernel_for_testing(std::nullopt);
    set_gelu_dropout_kernel_for_testing(std::nullopt);
    set_add_layer_norm_kernel_for_testing(std::nullopt);
    set_embedding_backward_kernel_for_testing(std::nullopt);
  }
  DType t() const { return GetParam(); }
};

Results layer_norm_results(LayerNormKernel kernel, int64_t rows, int64_t dim, DType t, DType param_type) {
  set_layer_norm_kernel_for_testing(kernel);
  const Device gpu = Device::cuda(0);
  Tensor x = random_tensor({rows, dim}, 50, t, gpu).set_requires_grad(true);
  Tensor w = random_tensor({dim}, 51, param_type, gpu).set_requires_grad(true);
  Tensor b = random_tensor({dim}, 52, param_type, gpu).set_requires_grad(true);
  Tensor y = layer_norm(x, w, b, 1e-5);
  y.backward(random_tensor({rows, dim}, 53, t, gpu));
  return {y.to_double_vector(), x.grad().to_double_vector(), w.grad().to_double_vector(),
          b.grad().to_double_vector()};
}

// a and b agree to a unit in the last place of a 16-bit type, or to a few f32 roundings of the
// largest magnitude (a column sum over up to 3000 rows of terms that may each differ by one).
::testing::AssertionResult within_a_rounding(const std::vector<double>& a, const std::vector<double>& b, DType t) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " values against " << b.size();
  double largest = 0;
  for (double v : b) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = t == DType::BF16 ? 0x1p-7 * std::fabs(b[i]) : t == DType::F16 ? 0x1p-10 * std::fabs(b[i]) + 0x1p-24
                                                                                     : 0x1p-20 * largest;
    if (std::fabs(a[i] - b[i]) > tol)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " against " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// Layer norm's forward, input gradient and parameter gradients under `kernel` against one_row's, at
// 1000 x 256: 16-bit rows of one warp (eight groups per block: two rows per group and three ahead
// for multi_row, eight lanes of a slot for lanes) and a partial last block; 513 x 768: f32 rows of
// 192 threads; 7 x 100, 3 x 1, 2 x 520: scalar kernels in 16 bits; 5 x 4096: 16 values per thread.
void expect_layer_norm_agrees_with_one_row(LayerNormKernel kernel, DType t) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{1000, 256}, Case{513, 768}, Case{7, 100}, Case{129, 200}, Case{3, 1}, Case{5, 4096},
                 Case{2, 520}, Case{3000, 64}}) {
    for (DType param_type : {DType::F32, t}) {
      const std::string what = std::string(layer_norm_kernel_name(kernel)) + ", " + std::to_string(c.rows) + " x " +
                               std::to_string(c.dim) + ", parameters " + std::string(dtype_name(param_type));
      const Results other = layer_norm_results(kernel, c.rows, c.dim, t, param_type);
      const Results one = layer_norm_results(LayerNormKernel::OneRow, c.rows, c.dim, t, param_type);
      const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
      for (size_t i = 0; i < one.size(); ++i)
        EXPECT_TRUE(within_a_rounding(other[i], one[i], i < 2 ? t : param_type)) << names[i] << ", " << what;
    }
  }
}

TEST_P(NewRowKernels, LayerNormMultiRowAgreesWithOneRowToARounding) {
  expect_layer_norm_agrees_with_one_row(LayerNormKernel::MultiRow, t());
}

TEST_P(NewRowKernels, LayerNormLanesAgreesWithOneRowToARounding) {
  expect_layer_norm_agrees_with_one_row(LayerNormKernel::Lanes, t());
}

TEST_P(NewRowKernels, LayerNormLanesParameterGradientsAreBitwiseRepeatable) {
  EXPECT_EQ(layer_norm_results(LayerNormKernel::Lanes, 1000, 256, t(), DType::F32),
            layer_norm_results(LayerNormKernel::Lanes, 1000, 256, t(), DType::F32));
}

// Sequence b keeps its first seq - b * seq / batch positions; the last of a batch > 1 is all padding.
Tensor padding(int64_t batch, int64_t seq) {
  std::vector<int64_t> m;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) m.push_back(batch > 1 && b == batch - 1 ? 0 : (s < seq - b * seq / batch ? 1 : 0));
  return Tensor::from_vector(m, {batch, seq}, DType::U8, Device::cuda(0));
}

Results masked_mean_results(MaskedMeanKernel kernel, int64_t batch, int64_t seq, int64_t dim, DType t) {
  set_masked_mean_kernel_for_testing(kernel);
  Tensor x = random_tensor({batch, seq, dim}, 54, t, Device::cuda(0)).set_requires_grad(true);
  Tensor y = masked_mean_pool(x, padding(batch, seq));
  y.backward(random_tensor({batch, dim}, 55, t, Device::cuda(0)));  // divides by the forward's counts
  return {y.to_double_vector(), x.grad().to_double_vector()};
}

TEST_P(NewRowKernels, MaskedMeanLaneGroupsGiveTheOneBlockBits) {
  struct Case { int64_t batch, seq, dim; };
  // From 16 lane groups (one sequence, one column block) down to 1 (300 sequences of 768 cover
  // any GPU of up to 450 SMs twice with 32-column blocks in 16 bits: the one_block kernel runs).
  for (Case c : {Case{1, 512, 256}, Case{1, 1, 33}, Case{3, 7, 100}, Case{2, 129, 200}, Case{4, 512, 72},
                 Case{64, 512, 256}, Case{300, 16, 768}}) {
    const std::string what = std::to_string(c.batch) + " x " + std::to_string(c.seq) + " x " + std::to_string(c.dim);
    const Results groups = masked_mean_results(MaskedMeanKernel::LaneGroups, c.batch, c.seq, c.dim, t());
    const Results one = masked_mean_results(MaskedMeanKernel::OneBlock, c.batch, c.seq, c.dim, t());
    EXPECT_EQ(groups[0], one[0]) << "output, " << what;
    EXPECT_EQ(groups[1], one[1]) << "input gradient, " << what;
  }
}

// dropout(x) + residual (or plain dropout), p = 0.1, backward without a bias gradient.
Results dropout_results(DropoutBackwardKernel kernel, int64_t rows, int64_t dim, bool residual, DType t) {
  set_dropout_backward_kernel_for_testing(kernel);
  const Device gpu = Device::cuda(0);
  Tensor x = random_tensor({rows, dim}, 56, t, gpu).set_requires_grad(true);
  Tensor r = residual ? random_tensor({rows, dim}, 57, t, gpu).set_requires_grad(true) : Tensor();
  Tensor y = bias_dropout_add(x, Tensor(), r, 0.1, true, 58, 59);
  y.backward(random_tensor({rows, dim}, 60, t, gpu));
  Results out{y.to_double_vector(), x.grad().to_double_vector()};
  if (residual) out.push_back(r.grad().to_double_vector());
  return out;
}

TEST_P(NewRowKernels, DropoutBackwardFlatGivesTheBatchedBits) {
  struct Case { int64_t rows, dim; };
  // 4096 x 256: whole vectors; 7 x 100 in 16 bits and 129 x 33: elements one by one (and a tail).
  for (Case c : {Case{4096, 256}, Case{7, 100}, Case{129, 33}, Case{1, 1}})
    for (bool residual : {false, true}) {
      const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim) +
                               (residual ? ", with a residual" : ", plain dropout");
      const Results flat = dropout_results(DropoutBackwardKernel::Flat, c.rows, c.dim, residual, t());
      const Results batched = dropout_results(DropoutBackwardKernel::Batched, c.rows, c.dim, residual, t());
      for (size_t i = 0; i < batched.size(); ++i) EXPECT_EQ(flat[i], batched[i]) << "result " << i << ", " << what;
    }
}

// The three ops whose bias gradient is a column sum, forward and backward under `walk`: linear
// (its bias gradient when cuBLASLt's BGRADB epilogue is off, the default), bias + GELU, and
// bias + dropout + residual (p = 0.1). Results: per op, the output and every gradient.
Results bias_gradient_results(ColumnSumKernel walk, int64_t rows, int64_t dim, DType t) {
  set_column_sum_kernel_for_testing(walk);
  const Device gpu = Device::cuda(0);
  Results out;
  auto run = [&](auto op, std::vector<Tensor> inputs) {
    for (Tensor& in : inputs) in.set_requires_grad(true);
    Tensor y = op(inputs);
    y.backward(random_tensor(y.shape(), 64, t, gpu));
    out.push_back(y.to_double_vector());
    for (const Tensor& in : inputs) out.push_back(in.grad().to_double_vector());
  };
  run([](const auto& in) { return linear(in[0], in[1], in[2]); },
      {random_tensor({rows, 48}, 61, t, gpu), random_tensor({dim, 48}, 62, t, gpu), random_tensor({dim}, 63, t, gpu)});
  run([](const auto& in) { return bias_gelu(in[0], in[1]); },
      {random_tensor({rows, dim}, 65, t, gpu), random_tensor({dim}, 66, t, gpu)});
  run([](const auto& in) { return bias_dropout_add(in[0], in[1], in[2], 0.1, true, 67, 68); },
      {random_tensor({rows, dim}, 69, t, gpu), random_tensor({dim}, 70, t, gpu), random_tensor({rows, dim}, 71, t, gpu)});
  return out;
}

// Column sums of the same terms added in two orders: each within a unit in the last place of a
// 16-bit type of the other, plus 2^-16 of the largest sum (f32 reordering over up to 3000 rows of
// terms near 1 moves a sum by about 1e-5; a row missed or counted twice, by about 1).
::testing::AssertionResult within_a_reordered_sum(const std::vector<double>& a, const std::vector<double>& b, DType t) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " values against " << b.size();
  double largest = 0;
  for (double v : b) largest = std::max(largest, std::fabs(v));
  const double ulp = t == DType::BF16 ? 0x1p-7 : t == DType::F16 ? 0x1p-10 : 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > ulp * std::fabs(b[i]) + 0x1p-16 * largest)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " against " << b[i];
  return ::testing::AssertionSuccess();
}

TEST_P(NewRowKernels, ColumnSumBlockWalkAgreesWithTheThreadWalk) {
  struct Case { int64_t rows, dim; };
  // 1000 x 256: a block row per slot of whole 16-byte vectors, a partial last slot; 3000 x 64: four
  // vector columns, most of the block's lanes idle; 513 x 768 and 7 x 100 (scalar in 16 bits); 5 x 3:
  // fewer rows than thread rows.
  for (Case c : {Case{1000, 256}, Case{3000, 64}, Case{513, 768}, Case{7, 100}, Case{5, 3}}) {
    const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim);
    const Results block = bias_gradient_results(ColumnSumKernel::Block, c.rows, c.dim, t());
    const Results thread = bias_gradient_results(ColumnSumKernel::Thread, c.rows, c.dim, t());
    ASSERT_EQ(block.size(), thread.size());
    // Per op: output, input gradient(s), then the bias gradient (and bias_dropout_add's residual's).
    const std::vector<size_t> bias_grads = {3, 6, 9};
    for (size_t i = 0; i < thread.size(); ++i) {
      if (std::find(bias_grads.begin(), bias_grads.end(), i) != bias_grads.end())
        EXPECT_TRUE(within_a_reordered_sum(block[i], thread[i], t())) << "bias gradient " << i << ", " << what;
      else
        EXPECT_EQ(block[i], thread[i]) << "result " << i << ", " << what;
    }
  }
}

TEST_P(NewRowKernels, ColumnSumBlockWalkIsBitwiseRepeatable) {
  EXPECT_EQ(bias_gradient_results(ColumnSumKernel::Block, 1000, 256, t()),
            bias_gradient_results(ColumnSumKernel::Block, 1000, 256, t()));
}

// bias_gelu_dropout's output and both gradients under `kernel`, p = 0.1 (ag_news_optimized's), the
// keep decisions saved by the forward or computed again by the backward (`keep`).
Results gelu_dropout_results(GeluDropoutKernel kernel, ColumnSumKernel walk, int64_t rows, int64_t dim, DType t,
                             DropoutKeep keep = DropoutKeep::Recompute) {
  set_gelu_dropout_kernel_for_testing(kernel);
  set_column_sum_kernel_for_testing(walk);
  set_dropout_keep_for_testing(keep);
  const Device gpu = Device::cuda(0);
  Tensor x = random_tensor({rows, dim}, 72, t, gpu).set_requires_grad(true);
  Tensor b = random_tensor({dim}, 73, t, gpu).set_requires_grad(true);
  Results out;
  for (auto a : {GeluApproximation::None, GeluApproximation::Tanh}) {
    Tensor y = bias_gelu_dropout(x, b, a, 0.1, true, 74, 75);
    y.backward(random_tensor(y.shape(), 76, t, gpu));
    out.push_back(y.to_double_vector());
    out.push_back(x.grad().to_double_vector());
    out.push_back(b.grad().to_double_vector());
    x.set_grad(Tensor());
    b.set_grad(Tensor());
  }
  set_dropout_keep_for_testing(std::nullopt);
  return out;
}

// The fused kernels round where the separate ones store and draw the same keep decisions: the same
// bits, output and both gradients, under both column-sum walks. 4096 x 1024: the FFN's width, whole
// 16-byte vectors, many slots; 513 x 256; 7 x 100 and 33 x 17: the scalar kernels (in 16 bits, and in
// f32 for 17).
TEST_P(NewRowKernels, GeluDropoutFusedGivesTheSeparateKernelsBits) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{4096, 1024}, Case{513, 256}, Case{7, 100}, Case{33, 17}})
    for (ColumnSumKernel walk : {ColumnSumKernel::Thread, ColumnSumKernel::Block}) {
      const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim) + ", " +
                               column_sum_kernel_name(walk) + " walk";
      const Results fused = gelu_dropout_results(GeluDropoutKernel::Fused, walk, c.rows, c.dim, t());
      const Results separate = gelu_dropout_results(GeluDropoutKernel::Separate, walk, c.rows, c.dim, t());
      ASSERT_EQ(fused.size(), separate.size());
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], separate[i]) << "result " << i << ", " << what;
    }
}

// TANDEM_DROPOUT_KEEP=saved: the backward reads the decisions the fused forward computed and saved, so
// output and gradients are the recomputing kernels' bits, in both walks, at the shapes above.
TEST_P(NewRowKernels, GeluDropoutSavedKeepBitsGiveTheRecomputedBits) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{4096, 1024}, Case{513, 256}, Case{7, 100}, Case{33, 17}})
    for (ColumnSumKernel walk : {ColumnSumKernel::Thread, ColumnSumKernel::Block}) {
      const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim) + ", " +
                               column_sum_kernel_name(walk) + " walk";
      const Results saved = gelu_dropout_results(GeluDropoutKernel::Fused, walk, c.rows, c.dim, t(), DropoutKeep::Saved);
      const Results recomputed = gelu_dropout_results(GeluDropoutKernel::Fused, walk, c.rows, c.dim, t());
      ASSERT_EQ(saved.size(), recomputed.size());
      for (size_t i = 0; i < saved.size(); ++i) EXPECT_EQ(saved[i], recomputed[i]) << "result " << i << ", " << what;
    }
}

// bias_gelu_dropout's input gradient with the bias not requiring grad (so no bias gradient is
// formed) and TANDEM_BIAS_GRADIENT `where`: row, the column walk with no sums stored; gemm, the rows
// walk. p = 0.1 with the keep decisions recomputed or saved, and p = 0 (bias_gelu alone).
std::vector<double> gelu_input_gradient_without_bias_gradient(BiasGradient where, int64_t rows, int64_t dim, DType t,
                                                              double p, DropoutKeep keep) {
  set_bias_gradient_for_testing(where);
  set_dropout_keep_for_testing(keep);
  const Device gpu = Device::cuda(0);
  Tensor x = random_tensor({rows, dim}, 72, t, gpu).set_requires_grad(true);
  Tensor b = random_tensor({dim}, 73, t, gpu);
  Tensor y = bias_gelu_dropout(x, b, GeluApproximation::Tanh, p, true, 74, 75);
  y.backward(random_tensor(y.shape(), 76, t, gpu));
  set_dropout_keep_for_testing(std::nullopt);
  set_bias_gradient_for_testing(std::nullopt);
  return x.grad().to_double_vector();
}

// The rows walk does the column walk's per-element arithmetic in its order: the same dx bits, at the
// shapes of the fused kernels' test.
TEST_P(NewRowKernels, GeluBackwardRowsWalkGivesTheColumnWalksBits) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{4096, 1024}, Case{513, 256}, Case{7, 100}, Case{33, 17}})
    for (double p : {0.1, 0.0})
      for (DropoutKeep keep : {DropoutKeep::Recompute, DropoutKeep::Saved}) {
        const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim) + ", p " + std::to_string(p) +
                                 ", keep " + dropout_keep_name(keep);
        EXPECT_EQ(gelu_input_gradient_without_bias_gradient(BiasGradient::Gemm, c.rows, c.dim, t(), p, keep),
                  gelu_input_gradient_without_bias_gradient(BiasGradient::Row, c.rows, c.dim, t(), p, keep))
            << what;
      }
}

// bias_dropout_add_layer_norm's output and its five gradients under `kernel`, with the layer norm's
// `ln` kernels, its parameters of type param_type, p = 0.1 (and p = 0: no branch gradient written).
Results add_layer_norm_results(AddLayerNormKernel kernel, LayerNormKernel ln, int64_t rows, int64_t dim, double p,
                               DType t, DType param_type) {
  set_add_layer_norm_kernel_for_testing(kernel);
  set_layer_norm_kernel_for_testing(ln);
  set_column_sum_kernel_for_testing(ColumnSumKernel::Thread);
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> in{random_tensor({rows, dim}, 80, t, gpu), random_tensor({dim}, 81, t, gpu),
                         random_tensor({rows, dim}, 82, t, gpu), random_tensor({dim}, 83, param_type, gpu),
                         random_tensor({dim}, 84, param_type, gpu)};
  for (Tensor& x : in) x.set_requires_grad(true);
  Tensor y = bias_dropout_add_layer_norm(in[0], in[1], in[2], p, true, 85, 86, nullptr, in[3], in[4]);
  y.backward(random_tensor(y.shape(), 87, t, gpu));
  Results out{y.to_double_vector()};
  for (const Tensor& x : in) out.push_back(x.grad().to_double_vector());
  return out;
}

// The fused kernels compute the sum and the branch's gradient where the separate ones store and load
// them, with the separate kernels' keep decisions and (TANDEM_COLUMN_SUM=thread) column-sum order: the
// same bits, with one_row's and multi_row's layer norm. With lanes, the fused backward adds the branch
// bias's gradient over the block's groups as it adds the layer norm's parameter gradients (the
// emulated test pins that order), which the separate bias_dropout_add's thread walk does not: that
// gradient agrees to a rounding, every other result bit for bit. 1000 x 256: d_model 256, whole
// 16-byte vectors; 513 x 768: f32 rows of several warps; 7 x 100 and 33 x 17: the scalar kernels;
// 5 x 4096: 16 values a thread.
TEST_P(NewRowKernels, AddLayerNormFusedGivesTheSeparateKernelsBits) {
  struct Case { int64_t rows, dim; };
  for (Case c : {Case{1000, 256}, Case{513, 768}, Case{7, 100}, Case{33, 17}, Case{5, 4096}})
    for (LayerNormKernel ln : {LayerNormKernel::OneRow, LayerNormKernel::MultiRow, LayerNormKernel::Lanes})
      for (double p : {0.1, 0.0})
        for (DType param_type : {DType::F32, t()}) {
          const std::string what = std::to_string(c.rows) + " x " + std::to_string(c.dim) + ", " +
                                   layer_norm_kernel_name(ln) + ", p " + std::to_string(p) + ", parameters " +
                                   std::string(dtype_name(param_type));
          const Results fused = add_layer_norm_results(AddLayerNormKernel::Fused, ln, c.rows, c.dim, p, t(), param_type);
          const Results separate =
              add_layer_norm_results(AddLayerNormKernel::Separate, ln, c.rows, c.dim, p, t(), param_type);
          ASSERT_EQ(fused.size(), separate.size());
          constexpr size_t kBranchBiasGradient = 2;
          for (size_t i = 0; i < fused.size(); ++i) {
            if (ln == LayerNormKernel::Lanes && i == kBranchBiasGradient)
              EXPECT_TRUE(within_a_reordered_sum(fused[i], separate[i], t())) << "branch bias gradient, " << what;
            else
              EXPECT_EQ(fused[i], separate[i]) << "result " << i << ", " << what;
          }
        }
}

// Ids for the embedding tests: uniform over [0, vocab), or with id 0 at every position of the
// batch's first `padded` ones (a padding id filling most of a batch: one segment of thousands of
// sorted positions), and `bad` ids past the vocabulary at the end.
std::vector<int64_t> embedding_ids(int64_t n, int64_t vocab, int64_t padded, int64_t bad) {
  std::vector<int64_t> ids;
  uint64_t state = 12345;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(i < padded ? 0 : static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab)));
  }
  for (int64_t i = 0; i < bad; ++i) ids[static_cast<size_t>(n - 1 - 3 * i)] = vocab + i;
  return ids;
}

// Waits for the GPU and drops the out-of-range id it recorded, if any: the cases with such ids check
// the sums (OpsParity.EmbeddingOutOfRangeIdIsReportedByTheGpu checks the report), and the next op
// on the host would raise it.
void drop_the_reported_index_error() {
  cuda::device_synchronize();
  try {
    raise_pending_index_error();
  } catch (const Error&) {
  }
}

// The token table's gradient under `kernel` (the position table's is the same code either way).
std::vector<double> embedding_token_gradient(EmbeddingBackwardKernel kernel, const std::vector<int64_t>& ids,
                                             int64_t batch, int64_t seq, int64_t dim, int64_t vocab, DType t) {
  set_embedding_backward_kernel_for_testing(kernel);
  const Device gpu = Device::cuda(0);
  Tensor tok = random_tensor({vocab, dim}, 80, t, gpu).set_requires_grad(true);
  Tensor pos = random_tensor({seq, dim}, 81, t, gpu).set_requires_grad(true);
  Tensor dy = random_tensor({batch, seq, dim}, 82, t, gpu);
  Tensor y = embedding(Tensor::from_vector(ids, {batch, seq}, DType::I64, gpu), tok, pos);
  drop_the_reported_index_error();  // the backward checks for one before it starts
  y.backward(dy);
  drop_the_reported_index_error();
  return tok.grad().to_double_vector();
}

// The window walk adds each id's rows in another order than the pieces walk (window pieces, then
// eight lanes of heads): its token gradient agrees to a rounding of the sums. 64 x 512 ids of 256
// (as many tokens as ag_news_optimized's batch): uniform, then 85 % padding (one segment over
// about 870 windows); 8 x 512 of 768 (3 to 24 column chunks); 16 x 100 of 100 and 3 x 33 of 33 (no
// whole 16-byte vectors; combine at width 4 and 1); ids past the vocabulary, which both skip.
TEST_P(NewRowKernels, EmbeddingWindowsAgreeWithThePiecesToARounding) {
  struct Case { int64_t batch, seq, dim, vocab, padded, bad; };
  for (Case c : {Case{64, 512, 256, 30522, 0, 0}, Case{64, 512, 256, 30522, 27853, 0}, Case{8, 512, 768, 1000, 3000, 5},
                 Case{16, 100, 100, 7, 0, 0}, Case{3, 33, 33, 5, 40, 2}}) {
    const std::vector<int64_t> ids = embedding_ids(c.batch * c.seq, c.vocab, c.padded, c.bad);
    const std::string what = std::to_string(c.batch) + " x " + std::to_string(c.seq) + " of " + std::to_string(c.dim) +
                             ", " + std::to_string(c.padded) + " padded";
    const std::vector<double> windows =
        embedding_token_gradient(EmbeddingBackwardKernel::Windows, ids, c.batch, c.seq, c.dim, c.vocab, t());
    const std::vector<double> pieces =
        embedding_token_gradient(EmbeddingBackwardKernel::Pieces, ids, c.batch, c.seq, c.dim, c.vocab, t());
    EXPECT_TRUE(within_a_reordered_sum(windows, pieces, t())) << what;
  }
}

TEST_P(NewRowKernels, EmbeddingWindowsAreBitwiseRepeatable) {
  const std::vector<int64_t> ids = embedding_ids(64 * 512, 30522, 27853, 0);
  EXPECT_EQ(embedding_token_gradient(EmbeddingBackwardKernel::Windows, ids, 64, 512, 256, 30522, t()),
            embedding_token_gradient(EmbeddingBackwardKernel::Windows, ids, 64, 512, 256, 30522, t()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NewRowKernels, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::kernels
