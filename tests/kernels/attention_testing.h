// Shared by the attention tests: the test cases and their names, padding
// masks from sequence lengths, one problem's inputs and CPU reference, the
// tolerances against that reference (attention_parity_test.cc says why they
// are what they are), the comparisons of a forward's results, the check of
// an environment switch's error, and (CUDA builds) one backward path's dqkv on
// a GPU.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/attention.h"
#include "kernels/attention_params.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cuda/attention_switches.h"
#include "tests/testing/errors.h"  // rejects_naming_variable_and_value, for the switches
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_cuda.h"
#endif

namespace tandem::testing {

// [B, S] u8 key-padding mask: row b has lengths[b] real tokens (1) followed by padding (0).
inline Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t seq, Device device = Device::cpu()) {
  std::vector<int64_t> values;
  for (int64_t len : lengths)
    for (int64_t j = 0; j < seq; ++j) values.push_back(j < len ? 1 : 0);
  return Tensor::from_vector(values, {static_cast<int64_t>(lengths.size()), seq}, DType::U8, device);
}

// The kernels' mask argument: null for no mask.
inline const uint8_t* mask_ptr(const Tensor& mask) { return mask.defined() ? mask.data<uint8_t>() : nullptr; }

// One attention problem's sizes, padding and dropout rate.
struct AttentionCase {
  int64_t batch, seq, heads, head_dim;
  std::vector<int64_t> lengths;  // empty: no mask
  double dropout;
};

inline std::string case_name(const AttentionCase& c) {
  std::string n = fmt::format("B{}_S{}_H{}_Dh{}", c.batch, c.seq, c.heads, c.head_dim);
  if (!c.lengths.empty()) n += "_padded";
  if (c.dropout > 0) n += "_dropout";
  return n;
}

inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << case_name(c); }

// The name of a (dtype, case) parameterised test: "bf16_B2_S7_H3_Dh20_padded".
inline std::string dtype_and_case_name(const ::testing::TestParamInfo<std::tuple<DType, AttentionCase>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" + case_name(std::get<1>(info.param));
}

// The same for (dtype, case, pipelined forward kernel): "wide_bf16_B2_S7_H3_Dh20_padded" for PipelinedWide.
inline std::string pipelined_dtype_and_case_name(
    const ::testing::TestParamInfo<std::tuple<DType, AttentionCase, kernels::AttentionForwardKernel>>& info) {
  const bool wide = std::get<2>(info.param) == kernels::AttentionForwardKernel::PipelinedWide;
  return std::string(wide ? "wide_" : "") + std::string(dtype_name(std::get<0>(info.param))) + "_" +
         case_name(std::get<1>(info.param));
}

// One problem on the CPU: random inputs (qkv seed 1, dout seed 2), the mask, and the CPU reference's
// forward (out, lse), which a backward reads; attention dropout by `rng`'s rule.
struct AttentionProblem {
  kernels::AttentionShape s;
  kernels::AttentionDropout d;
  DType t;
  Tensor qkv, mask, out, lse, dout;
};

inline AttentionProblem make_problem(const AttentionCase& c, DType t,
                                     kernels::AttentionDropoutRng rng = kernels::AttentionDropoutRng::Philox10x8) {
  AttentionProblem p{{c.batch, c.seq, c.heads, c.head_dim}, {static_cast<float>(c.dropout), 31, 4, nullptr, rng}, t,
                     {}, {}, {}, {}, {}};
  const Shape out_shape{c.batch, c.seq, c.heads * c.head_dim};
  p.qkv = random_tensor({c.batch, c.seq, 3 * c.heads * c.head_dim}, 1, t);
  p.mask = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq);
  p.dout = random_tensor(out_shape, 2, t);
  p.out = Tensor::empty(out_shape, t);
  p.lse = Tensor::empty({c.batch, c.heads, c.seq}, DType::F32);
  kernels::attention_forward_cpu(p.qkv.data_ptr(), mask_ptr(p.mask), p.out.data_ptr(), p.lse.data_ptr(), p.s, p.d, t);
  return p;
}

// qkv [B, S, 3 H Dh] on c's padding (c.lengths) with K and V of every key in a 64-key tile past its row's
// last real key set to NaN, Q untouched (every query is computed): what a kernel that skips those tiles
// (trimmed key tiles) must never read. With keep_first_tile, tile 0 stays clean even in a row with no
// real key (the ordered fused paths run it, so that their chain's end writes that row's dQ).
inline Tensor with_padding_tiles_poisoned(const AttentionCase& c, const Tensor& qkv, bool keep_first_tile = false) {
  const int64_t width = c.heads * c.head_dim, tile = 64;
  std::vector<double> v = qkv.to_double_vector();
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t first = (c.lengths[static_cast<size_t>(b)] + tile - 1) / tile * tile;
    for (int64_t j = keep_first_tile && first == 0 ? tile : first; j < c.seq; ++j)
      for (int64_t k = width; k < 3 * width; ++k)
        v[static_cast<size_t>((b * c.seq + j) * 3 * width + k)] = std::nan("");
  }
  return Tensor::from_vector(v, qkv.shape(), qkv.dtype(), qkv.device());
}

// Whether any element of t is NaN.
inline bool any_nan(const Tensor& t) {
  for (double v : t.to_double_vector())
    if (std::isnan(v)) return true;
  return false;
}

// The CPU reference's dqkv for p.
inline Tensor cpu_backward(const AttentionProblem& p) {
  Tensor dqkv = Tensor::empty(p.qkv.shape(), p.t);
  kernels::attention_backward_cpu(p.qkv.data_ptr(), mask_ptr(p.mask), p.lse.data_ptr(), p.dout.data_ptr(),
                                  dqkv.data_ptr(), p.s, p.d, p.t);
  return dqkv;
}

// attention() forward and backward on GPU 0 and on the CPU, from the same inputs (qkv seed 1, dout
// seed 2, dropout seeds 31, 4), with whichever CUDA kernels the switches pick.
struct GpuAndCpuResults {
  Tensor out_gpu, out_cpu, grad_gpu, grad_cpu;  // grad: of qkv
};

inline GpuAndCpuResults attention_on_gpu_and_cpu(const AttentionCase& c, DType t) {
  Tensor qkv_cpu = random_tensor({c.batch, c.seq, 3 * c.heads * c.head_dim}, 1, t).set_requires_grad(true);
  Tensor qkv_gpu = qkv_cpu.detach().to(Device::cuda(0)).set_requires_grad(true);
  Tensor mask_cpu = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq);
  Tensor mask_gpu = c.lengths.empty() ? Tensor() : mask_cpu.to(Device::cuda(0));
  const int heads = static_cast<int>(c.heads);
  Tensor out_cpu = kernels::attention(qkv_cpu, mask_cpu, heads, c.dropout, 31, 4);
  Tensor out_gpu = kernels::attention(qkv_gpu, mask_gpu, heads, c.dropout, 31, 4);
  Tensor dout = random_tensor(out_cpu.shape(), 2, t);
  out_cpu.backward(dout);
  out_gpu.backward(dout.to(Device::cuda(0)));
  return {out_gpu, out_cpu, qkv_gpu.grad(), qkv_cpu.grad()};
}

#if TANDEM_WITH_CUDA
// A GPU suite over (dtype, case): skipped without a GPU (failed under TANDEM_REQUIRE_GPU=1), with the
// case's random qkv (seed 5) on GPU 0 and the forward-kernel and backward-path pairs that between them
// run every kernel (f32 runs the tiled forward and folds the pipelined paths into their plain forms).
class GpuAttentionVariants : public ::testing::TestWithParam<std::tuple<DType, AttentionCase>> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
  DType dtype() const { return std::get<0>(GetParam()); }
  const AttentionCase& attention_case() const { return std::get<1>(GetParam()); }
  Tensor qkv() const {
    const AttentionCase& c = attention_case();
    return random_tensor({c.batch, c.seq, 3 * c.heads * c.head_dim}, 5, dtype(), Device::cuda(0));
  }
  static std::vector<std::pair<kernels::AttentionForwardKernel, kernels::AttentionBackwardPath>> variants() {
    using F = kernels::AttentionForwardKernel;
    using B = kernels::AttentionBackwardPath;
    return {{F::Tiled, B::Split},          {F::Pipelined, B::SplitPipelined},
            {F::PipelinedWide, B::Fused},  {F::Pipelined, B::FusedOrdered},
            {F::Pipelined, B::FusedOrderedPipelined}};
  }
};

// dqkv from attention_backward_cuda on `path`, after the GPU forward (the tiled kernel), for fixed inputs
// (qkv seed 5, dout seed 6, dropout seeds 7, 3).
inline std::vector<double> gpu_backward(const AttentionCase& c, DType t, kernels::AttentionBackwardPath path) {
  const kernels::AttentionShape s{c.batch, c.seq, c.heads, c.head_dim};
  const kernels::AttentionDropout d{static_cast<float>(c.dropout), 7, 3};
  const Device gpu = Device::cuda(0);
  Tensor qkv = random_tensor({s.batch, s.seq, 3 * s.heads * s.head_dim}, 5, t, gpu);
  Tensor dout = random_tensor({s.batch, s.seq, s.heads * s.head_dim}, 6, t, gpu);
  Tensor mask = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq, gpu);
  const uint8_t* m = mask_ptr(mask);
  Tensor out = Tensor::empty(dout.shape(), t, gpu), lse = Tensor::empty({s.batch, s.heads, s.seq}, DType::F32, gpu);
  Tensor dqkv = Tensor::empty(qkv.shape(), t, gpu);
  void* stream = cuda::current_stream(0).handle();
  kernels::attention_forward_cuda(qkv.data_ptr(), m, out.data_ptr(), lse.data<float>(), s, d, t, 0, stream);
  kernels::attention_backward_cuda(qkv.data_ptr(), m, out.data_ptr(), lse.data<float>(), dout.data_ptr(),
                                   dqkv.data_ptr(), s, d, t, 0, stream, path);
  return dqkv.to_double_vector();
}

// attention() on GPU 0, forward and backward, from c's fixed inputs (qkv seed 1, dout seed 2, dropout seeds
// 31, 4), under whatever switches the caller forces: out and qkv's gradient, on the CPU. The suites that
// compare a switch's kernels with the default's bit for bit call it once each way.
inline std::pair<Tensor, Tensor> attention_op_on_the_gpu(const AttentionCase& c, DType t) {
  const Device gpu = Device::cuda(0);
  Tensor qkv = random_tensor({c.batch, c.seq, 3 * c.heads * c.head_dim}, 1, t, gpu).set_requires_grad(true);
  const Tensor mask = c.lengths.empty() ? Tensor() : padding_mask(c.lengths, c.seq, gpu);
  Tensor out = kernels::attention(qkv, mask, static_cast<int>(c.heads), c.dropout, 31, 4);
  out.backward(random_tensor(out.shape(), 2, t, gpu));
  return {out.to(Device::cpu()), qkv.grad().to(Device::cpu())};
}
#endif

// A kernel's forward output against the CPU reference: the reference computes in f32 from the same
// inputs and rounds once; the kernels round P to the 16-bit type before P V (about one ulp more).
struct Tolerance {
  double atol, rtol;
};
inline Tolerance attention_output_tolerance(DType t) {
  switch (t) {
    case DType::BF16: return {2e-2, 2e-2};
    case DType::F16: return {3e-3, 3e-3};
    default: return {1e-5, 1e-4};
  }
}

// A kernel's dqkv against the CPU reference: each element sums up to S terms rounded as above.
inline Tolerance attention_gradient_tolerance(DType t) {
  switch (t) {
    case DType::BF16: return {5e-2, 3e-2};
    case DType::F16: return {8e-3, 5e-3};
    default: return {1e-4, 1e-3};
  }
}

// The softmax normalisers agree to f32 rounding, and are +inf exactly for the rows with no real key.
inline ::testing::AssertionResult same_lse(const Tensor& got, const Tensor& expected) {
  const std::vector<double> a = got.to_double_vector(), e = expected.to_double_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isinf(e[i]) ? a[i] == e[i] : std::fabs(a[i] - e[i]) <= 1e-5 * (1 + std::fabs(e[i]));
    if (!ok) return ::testing::AssertionFailure() << "lse[" << i << "] = " << a[i] << ", expected " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// Two CPU tensors hold the same bits (same dtype and shape).
inline ::testing::AssertionResult same_bits(const Tensor& got, const Tensor& expected) {
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape())
    return ::testing::AssertionFailure() << got.str() << " vs " << expected.str();
  const auto* a = static_cast<const unsigned char*>(got.data_ptr());
  const auto* e = static_cast<const unsigned char*>(expected.data_ptr());
  const size_t width = dtype_size(got.dtype());
  for (size_t i = 0; i < got.nbytes(); i += width)
    if (std::memcmp(a + i, e + i, width) != 0)
      return ::testing::AssertionFailure() << "element " << i / width << " differs: "
                                           << got.to_double_vector()[i / width] << " vs "
                                           << expected.to_double_vector()[i / width];
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
