// Every CUDA kernel against its CPU reference, forward and backward, in f32,
// bf16 and f16. Skipped where no GPU is present.
//
// Tolerances: f32 results differ from the CPU reference only by summation
// order (cuBLAS and our reductions vs Eigen and an f64 accumulator):
// atol 1e-4, rtol 1e-4 at these sizes. 16-bit results are compared after both
// sides round to the same type; a one-ulp disagreement is allowed (bf16 ulp
// 2^-8 relative, f16 2^-11), plus accumulation-order error over K terms.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <optional>

#include "core/check.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/reduce.h"
#include "kernels/transpose.h"
#if TANDEM_WITH_CUDA
#include "core/stream.h"
#include "kernels/cuda/gemm_epilogue.h"
#endif
#include "tests/testing/errors.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"

namespace tandem::kernels {
namespace {

using testing::all_close;
using testing::random_tensor;

struct Tol {
  double atol, rtol;
};

Tol tolerance(DType t) {
  switch (t) {
    case DType::BF16: return {2e-2, 1e-2};
    case DType::F16: return {2e-3, 2e-3};
    default: return {1e-4, 1e-4};
  }
}

class CudaParity : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
  DType t() const { return GetParam(); }
  Tensor cpu_input(const Shape& s, uint64_t seed) const {
    return random_tensor(s, seed, t()).set_requires_grad(true);
  }
  static Tensor on_gpu(const Tensor& c) {
    Tensor g = c.detach().to(Device::cuda(0));
    if (c.requires_grad()) g.set_requires_grad(true);
    return g;
  }
  // linear(x[rows, in], w[out, in], b[out]) through check; seeds seed, seed + 1, seed + 2.
  void check_linear(int64_t rows, int64_t in, int64_t out, uint64_t seed) const {
    check([](const auto& x) { return linear(x[0], x[1], x[2]); },
          {cpu_input({rows, in}, seed), cpu_input({out, in}, seed + 1), cpu_input({out}, seed + 2)});
  }
  // Runs op on CPU and GPU copies of the inputs, backpropagates the same random
  // output gradient through both and compares outputs and input gradients.
  void check(const std::function<Tensor(const std::vector<Tensor>&)>& op, const std::vector<Tensor>& cpu_in) const {
    std::vector<Tensor> gpu_in;
    for (const Tensor& c : cpu_in) gpu_in.push_back(on_gpu(c));
    Tensor yc = op(cpu_in), yg = op(gpu_in);
    Tol tol = tolerance(t());
    EXPECT_TRUE(all_close(yg, yc, tol.atol, tol.rtol)) << "forward";
    Tensor dy = random_tensor(yc.shape(), 99, t());
    yc.backward(dy);
    yg.backward(dy.to(Device::cuda(0)));
    for (size_t i = 0; i < cpu_in.size(); ++i) {
      if (!cpu_in[i].requires_grad()) continue;
      EXPECT_TRUE(all_close(gpu_in[i].grad(), cpu_in[i].grad(), tol.atol, tol.rtol)) << "gradient of input " << i;
    }
  }
};

TEST_P(CudaParity, Add) { check([](const auto& in) { return add(in[0], in[1]); }, {cpu_input({1001}, 1), cpu_input({1001}, 2)}); }

TEST_P(CudaParity, Mul) { check([](const auto& in) { return mul(in[0], in[1]); }, {cpu_input({7, 129}, 3), cpu_input({7, 129}, 4)}); }

TEST_P(CudaParity, Scale) { check([](const auto& in) { return scale(in[0], 0.3); }, {cpu_input({4099}, 5)}); }

TEST_P(CudaParity, TransposeIsBitExact) {
  for (Shape s : {Shape{1, 1}, Shape{33, 31}, Shape{70, 5}, Shape{5, 1000}, Shape{257, 129}}) {
    Tensor x = random_tensor(s, 7, t());
    EXPECT_EQ(transpose(x.to(Device::cuda(0))).to_double_vector(), transpose(x).to_double_vector());
  }
  check([](const auto& in) { return transpose(in[0]); }, {cpu_input({37, 65}, 8)});
}

TEST_P(CudaParity, Relu) { check([](const auto& in) { return relu(in[0]); }, {cpu_input({33, 31}, 6)}); }

TEST_P(CudaParity, ElementwiseOnAnUnalignedView) {
  // Offsets that break 16-byte alignment take the scalar path.
  Tensor base = random_tensor({1003}, 7, t());
  Tensor a = base.view_range(1, {1001});
  Tensor b = base.view_range(2, {1001});
  Tensor yc = add(a, b);
  Tensor gbase = base.to(Device::cuda(0));
  Tensor yg = add(gbase.view_range(1, {1001}), gbase.view_range(2, {1001}));
  Tol tol = tolerance(t());
  EXPECT_TRUE(all_close(yg, yc, tol.atol, tol.rtol));
}

TEST_P(CudaParity, LinearWithBias) {
  check_linear(37, 29, 19, 8);  // odd sizes: nothing is a multiple of 8 or 32
}

TEST_P(CudaParity, LinearWithBiasOnManyRowsTakesTheVectorPaths) {
  // 16-byte rows and more rows than one column-sum slot holds (32): the
  // vectorised bias add and the two-pass bias gradient with many slots.
  check_linear(1000, 64, 256, 14);
}

#if TANDEM_WITH_CUDA
// The hand-written bias add and two-pass bias gradient (TANDEM_CUBLASLT_EPILOGUES=0), which the
// default (the forward epilogue) leaves to the backward only.
TEST_P(CudaParity, LinearWithoutCublasLtEpiloguesMatchesTheCpuReference) {
  testing::ForcedSwitch off(set_cublaslt_epilogues_for_testing, CublasLtEpilogues::Off);
  check_linear(1000, 64, 256, 14);
  check_linear(37, 29, 19, 8);
}

TEST_P(CudaParity, LinearWithCublasLtEpiloguesMatchesTheCpuReference) {
  testing::ForcedSwitch all(set_cublaslt_epilogues_for_testing, CublasLtEpilogues::All);
  check_linear(1000, 64, 256, 14);
  check_linear(37, 32, 24, 8);
}

// Called directly, so a silent fallback to the GemmEx path cannot pass for the epilogue.
TEST_P(CudaParity, CublasLtBiasAndBiasGradientEpiloguesRunAndMatchTheReference) {
  const int64_t rows = 512, in = 64, out = 192;
  Tensor x = cpu_input({rows, in}, 21), w = cpu_input({out, in}, 22), b = cpu_input({out}, 23);
  Tensor dy = random_tensor({rows, out}, 24, t());
  Tensor y_ref = linear(x, w, b);
  y_ref.backward(dy);
  Tensor xg = x.detach().to(Device::cuda(0)), wg = w.detach().to(Device::cuda(0)), bg = b.detach().to(Device::cuda(0));
  Tensor dyg = dy.to(Device::cuda(0));
  Tensor y = Tensor::empty({rows, out}, t(), Device::cuda(0));
  Tensor dw = Tensor::empty({out, in}, t(), Device::cuda(0)), db = Tensor::empty({out}, t(), Device::cuda(0));
  auto stream = static_cast<cudaStream_t>(cuda::current_stream(0).handle());
  ASSERT_TRUE(gemm_bias_lt(xg.data_ptr(), wg.data_ptr(), bg.data_ptr(), y.data_ptr(), rows, in, out, t(), 0, stream))
      << "cuBLASLt found no algorithm for the bias epilogue";
  ASSERT_TRUE(gemm_weight_bias_grad_lt(dyg.data_ptr(), xg.data_ptr(), dw.data_ptr(), db.data_ptr(), rows, in, out,
                                       t(), t(), t(), 0, stream))
      << "cuBLASLt found no algorithm for the BGRADB epilogue";
  Tol tol = tolerance(t());
  EXPECT_TRUE(all_close(y, y_ref, tol.atol, tol.rtol)) << "y";
  EXPECT_TRUE(all_close(dw, w.grad(), tol.atol, tol.rtol)) << "dw";
  // db sums 512 rows: the 16-bit tolerance scales with the number of terms.
  EXPECT_TRUE(all_close(db, b.grad(), tol.atol * 8, tol.rtol * 4)) << "db";
  if (t() == DType::F32) return;
  // dw and db in f32 for master parameters (TANDEM_LINEAR_GRADIENTS=master): where cuBLASLt has an
  // algorithm for an f32 D and bias gradient of 16-bit operands, they are the f32 sums, within f32
  // roundings of the CPU's (whose 16-bit ones above are those sums rounded); where it has none, linear
  // falls back to the GEMM and the column sum.
  Tensor dw32 = Tensor::empty({out, in}, DType::F32, Device::cuda(0));
  Tensor db32 = Tensor::empty({out}, DType::F32, Device::cuda(0));
  if (gemm_weight_bias_grad_lt(dyg.data_ptr(), xg.data_ptr(), dw32.data_ptr(), db32.data_ptr(), rows, in, out, t(),
                               DType::F32, DType::F32, 0, stream)) {
    Tensor x32 = x.detach().to(DType::F32), dy32 = dy.to(DType::F32);
    Tensor w32 = Tensor::zeros({out, in}).set_requires_grad(true), b32 = Tensor::zeros({out}).set_requires_grad(true);
    linear(x32, w32, b32).backward(dy32);
    EXPECT_TRUE(all_close(dw32, w32.grad(), 1e-4, 1e-5)) << "f32 dw";
    EXPECT_TRUE(all_close(db32, b32.grad(), 1e-4, 1e-5)) << "f32 db";
  } else {
    std::cout << "cuBLASLt has no BGRADB algorithm for an f32 D and bias gradient of " << dtype_name(t())
              << " operands: linear takes the GEMM and the column sum\n";
  }
}
#endif

TEST_P(CudaParity, LinearWithoutBiasSingleRow) {
  check([](const auto& in) { return linear(in[0], in[1]); }, {cpu_input({1, 64}, 11), cpu_input({33, 64}, 12)});
}

TEST_P(CudaParity, Sum) {
  Tol tol = tolerance(t());
  for (int64_t n : {1, 255, 256, 257, 100003}) {
    Tensor x = random_tensor({n}, 13, t());
    // Sums of n terms: the f32 accumulation error grows with sqrt(n); compare relative to the sum's scale.
    EXPECT_TRUE(all_close(sum(x.to(Device::cuda(0))), sum(x), tol.atol * std::sqrt(double(n)), tol.rtol)) << n;
  }
  check([](const auto& in) { return sum(in[0]); }, {cpu_input({3, 5}, 14)});
}

TEST_P(CudaParity, Mean) { check([](const auto& in) { return mean(in[0]); }, {cpu_input({513}, 15)}); }

TEST_P(CudaParity, SumIsDeterministic) {
  Tensor x = random_tensor({1 << 20}, 16, t()).to(Device::cuda(0));
  double first = sum(x).item();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sum(x).item(), first);
}

#if TANDEM_WITH_CUDA
TEST(CublasLtSwitch, IsTheForwardEpilogueUnlessSetAndNamesTheVariableOnABadValue) {
  EXPECT_EQ(parse_cublaslt_epilogues(nullptr), CublasLtEpilogues::Forward);
  EXPECT_EQ(parse_cublaslt_epilogues(""), CublasLtEpilogues::Forward);
  EXPECT_EQ(parse_cublaslt_epilogues("forward"), CublasLtEpilogues::Forward);
  EXPECT_EQ(parse_cublaslt_epilogues("0"), CublasLtEpilogues::Off);
  EXPECT_EQ(parse_cublaslt_epilogues("1"), CublasLtEpilogues::All);
  EXPECT_TRUE(testing::throws_error_containing([] { parse_cublaslt_epilogues("yes"); },
                                               "TANDEM_CUBLASLT_EPILOGUES must be forward, 0 or 1, got 'yes'"));
}
#endif

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaParity, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem::kernels
