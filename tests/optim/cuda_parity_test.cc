// Every CUDA kernel of optim/ against its CPU reference: fused AdamW and SGD,
// the device-side skip, unscale + inf/nan check, the scale update, and
// clipping by global norm. Skipped where no GPU is present.
//
// The tensor lists are built to exercise the multi-tensor layout: 150
// tensors (more than one launch holds at every depth), sizes with odd tails,
// exactly one chunk (4096), one chunk +- 1, many chunks, and empty tensors;
// one test uses unaligned gradient views (the scalar path).
//
// Tolerances: the optimizers evaluate the same f32 formulas on both sides;
// nvcc contracts a*b+c into FMAs and the CPU build does not, about one ulp
// per operation, so after three steps rtol 1e-5. The absolute part is a few
// ulps of the operands, not of the result: parameters and gradients are of
// order 1 (ulp up to 4.8e-7 at 4), and a momentum buffer that cancels to
// 1e-3 keeps their absolute error (an H200 showed 1.16e-7 against an atol
// of 1e-7, 2026-11-27), so atol 1e-6. Unscaling by a
// power of two and the scale update are exact. The clip norm is f32 on the
// GPU against f64 on the CPU over ~10^6 squares: rtol 1e-5.
#include <gtest/gtest.h>

#include <limits>

#include "kernels/elementwise.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tests/testing/gradcheck.h"

namespace tandem::optim {
namespace {

using testing::all_close;
using testing::random_tensor;

const Device kGpu = Device::cuda(0);

std::vector<int64_t> many_sizes() {
  const std::vector<int64_t> pattern = {1, 3, 4, 5, 4095, 4096, 4097, 8199, 0, 70001, 12, 257};
  std::vector<int64_t> sizes;
  for (int i = 0; i < 150; ++i) sizes.push_back(pattern[i % pattern.size()]);
  sizes[7] = 300007;  // one tensor of many chunks
  return sizes;
}

// The same parameters on the CPU and the GPU.
struct Twin {
  std::vector<Tensor> cpu, gpu;

  explicit Twin(const std::vector<int64_t>& sizes, uint64_t seed = 1) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor c = random_tensor({sizes[i]}, seed * 1000 + i, DType::F32).set_requires_grad(true);
      cpu.push_back(c);
      gpu.push_back(c.detach().to(kGpu).set_requires_grad(true));
    }
  }
  // Random gradients times `factor` (the same on both sides); every `skip`-th parameter gets none.
  void set_grads(uint64_t seed, size_t skip = 0, double factor = 1.0) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      Tensor g;
      if (skip == 0 || i % skip != 1) g = kernels::scale(random_tensor(cpu[i].shape(), seed * 7919 + i, DType::F32), factor);
      cpu[i].set_grad(g);
      gpu[i].set_grad(g.defined() ? g.to(kGpu) : Tensor());
    }
  }
  std::vector<Tensor> cpu_range(size_t a, size_t b) const { return {cpu.begin() + a, cpu.begin() + b}; }
  std::vector<Tensor> gpu_range(size_t a, size_t b) const { return {gpu.begin() + a, gpu.begin() + b}; }
};

::testing::AssertionResult same_values(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, double rtol,
                                       double atol) {
  for (size_t i = 0; i < cpu.size(); ++i) {
    auto r = all_close(gpu[i], cpu[i], atol, rtol);
    if (!r) return r << " (tensor " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_state(const Optimizer& gpu, const Optimizer& cpu, double rtol, double atol) {
  const auto g = gpu.state_dict(), c = cpu.state_dict();
  if (g.size() != c.size()) return ::testing::AssertionFailure() << g.size() << " state tensors vs " << c.size();
  for (const auto& [k, t] : c) {
    if (!g.count(k)) return ::testing::AssertionFailure() << "missing " << k;
    auto r = all_close(g.at(k), t, atol, rtol);
    if (!r) return r << " (" << k << ")";
  }
  return ::testing::AssertionSuccess();
}

constexpr double kRtol = 1e-5, kAtol = 1e-6;

class OptimCudaParity : public ::testing::Test {
 protected:
  void SetUp() override { TANDEM_REQUIRE_GPU(); }
};

TEST_F(OptimCudaParity, AdamWOverThreeStepsWithTwoGroupsAndMissingGradients) {
  Twin p(many_sizes());
  auto make = [](const std::vector<Tensor>& decay, const std::vector<Tensor>& no_decay) {
    return AdamW({{decay, {.lr = 1e-2, .betas = {0.9, 0.95}, .weight_decay = 0.1}},
                  {no_decay, {.lr = 3e-3, .weight_decay = 0.0}}});
  };
  AdamW cpu = make(p.cpu_range(0, 100), p.cpu_range(100, 150));
  AdamW gpu = make(p.gpu_range(0, 100), p.gpu_range(100, 150));
  for (uint64_t k = 0; k < 3; ++k) {
    p.set_grads(k, k == 1 ? 5 : 0);
    cpu.step();
    gpu.step();
  }
  EXPECT_TRUE(same_values(p.gpu, p.cpu, kRtol, kAtol));
  EXPECT_TRUE(same_state(gpu, cpu, kRtol, kAtol));
}

TEST_F(OptimCudaParity, SgdMomentumNesterovAndPlain) {
  Twin p(many_sizes());
  auto make = [](const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::vector<Tensor>& c) {
    return SGD({{a, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2}},
                {b, {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}},
                {c, {.lr = 0.1}}});
  };
  SGD cpu = make(p.cpu_range(0, 60), p.cpu_range(60, 120), p.cpu_range(120, 150));
  SGD gpu = make(p.gpu_range(0, 60), p.gpu_range(60, 120), p.gpu_range(120, 150));
  for (uint64_t k = 0; k < 3; ++k) {
    p.set_grads(k, k == 0 ? 4 : 0);  // some buffers start at the second step
    cpu.step();
    gpu.step();
  }
  EXPECT_TRUE(same_values(p.gpu, p.cpu, kRtol, kAtol));
  EXPECT_TRUE(same_state(gpu, cpu, kRtol, kAtol));
}

TEST_F(OptimCudaParity, UnalignedGradientViewsTakeTheScalarPath) {
  const std::vector<int64_t> sizes = {5, 4096, 4097, 9};
  Twin p(sizes);
  int64_t total = 1;
  for (int64_t n : sizes) total += n;
  Tensor bucket = random_tensor({total}, 77, DType::F32);
  Tensor gpu_bucket = bucket.to(kGpu);
  int64_t offset = 1;  // 4 bytes past a 16-byte boundary
  for (size_t i = 0; i < sizes.size(); ++i) {
    p.cpu[i].set_grad(bucket.view_range(offset, {sizes[i]}));
    p.gpu[i].set_grad(gpu_bucket.view_range(offset, {sizes[i]}));
    offset += sizes[i];
  }
  AdamW cpu(p.cpu), gpu(p.gpu);
  cpu.step();
  gpu.step();
  EXPECT_TRUE(same_values(p.gpu, p.cpu, kRtol, kAtol));
  Tensor norm_gpu = clip_grad_norm_(p.gpu, 1.0), norm_cpu = clip_grad_norm_(p.cpu, 1.0);
  EXPECT_TRUE(all_close(norm_gpu, norm_cpu, 0, 1e-5));
  EXPECT_TRUE(all_close(gpu_bucket, bucket, 1e-8, 1e-5));
}

TEST_F(OptimCudaParity, FoundInfOnTheDeviceSkipsTheWholeStep) {
  Twin p(many_sizes());
  AdamW adamw(p.gpu_range(0, 75));
  SGD sgd(p.gpu_range(75, 150), {.lr = 0.1, .momentum = 0.9});
  p.set_grads(1);
  adamw.step();
  sgd.step();
  std::vector<std::vector<double>> params;
  for (const Tensor& t : p.gpu) params.push_back(t.to_double_vector());
  std::map<std::string, std::vector<double>> state;
  for (const auto& [k, t] : adamw.state_dict()) state["adamw." + k] = t.to_double_vector();
  for (const auto& [k, t] : sgd.state_dict()) state["sgd." + k] = t.to_double_vector();

  p.set_grads(2);
  Tensor found = Tensor::full({}, 1.0, DType::F32, kGpu);
  adamw.step(found);
  sgd.step(found);

  for (size_t i = 0; i < p.gpu.size(); ++i) EXPECT_EQ(p.gpu[i].to_double_vector(), params[i]) << i;
  for (const auto& [k, t] : adamw.state_dict()) EXPECT_EQ(t.to_double_vector(), state["adamw." + k]) << k;
  for (const auto& [k, t] : sgd.state_dict()) EXPECT_EQ(t.to_double_vector(), state["sgd." + k]) << k;
}

TEST_F(OptimCudaParity, UnscaleAndCheckAcrossLaunches) {
  for (bool inject : {false, true}) {
    Twin p(many_sizes());
    p.set_grads(3, 0, 65536.0);
    if (inject) {  // a non-finite value in the last tensor: the last launch must report it
      for (auto* side : {&p.cpu, &p.gpu}) {
        Tensor g = side->back().grad();
        g.view_range(g.numel() - 1, {1}).fill_(std::numeric_limits<double>::quiet_NaN());
      }
    }
    SGD cpu(p.cpu), gpu(p.gpu);
    GradScaler scaler_cpu, scaler_gpu;
    scaler_cpu.scale(Tensor::zeros({}));
    scaler_gpu.scale(Tensor::zeros({}, DType::F32, kGpu));
    scaler_cpu.unscale_(cpu);
    scaler_gpu.unscale_(gpu);
    EXPECT_EQ(scaler_gpu.found_inf(gpu).item(), inject ? 1.0 : 0.0);
    EXPECT_EQ(scaler_cpu.found_inf(cpu).item(), inject ? 1.0 : 0.0);
    for (size_t i = 0; i + 1 < p.cpu.size(); ++i) {
      if (!p.cpu[i].grad().defined()) continue;
      EXPECT_EQ(p.gpu[i].grad().to_double_vector(), p.cpu[i].grad().to_double_vector()) << i;
    }
  }
}

TEST_F(OptimCudaParity, ScaleUpdatesFollowTheCpuSequence) {
  Twin p({3, 5});
  SGD cpu(p.cpu, {.lr = 0.01}), gpu(p.gpu, {.lr = 0.01});
  const GradScaler::Options options{.init_scale = 1024.0, .growth_interval = 2};
  GradScaler scaler_cpu(options), scaler_gpu(options);
  const std::vector<bool> overflow = {false, false, false, true, true, false, false, false, true, false};
  for (size_t k = 0; k < overflow.size(); ++k) {
    p.set_grads(k);
    if (overflow[k]) {
      p.cpu[0].grad().fill_(std::numeric_limits<double>::infinity());
      p.gpu[0].grad().fill_(std::numeric_limits<double>::infinity());
    }
    // The loss does not matter here: scale() creates the scale on the loss's device.
    scaler_cpu.scale(Tensor::zeros({}));
    scaler_gpu.scale(Tensor::zeros({}, DType::F32, kGpu));
    scaler_cpu.step(cpu);
    scaler_gpu.step(gpu);
    scaler_cpu.update();
    scaler_gpu.update();
    EXPECT_EQ(scaler_gpu.get_scale(), scaler_cpu.get_scale()) << k;
    EXPECT_EQ(scaler_gpu.growth_tracker(), scaler_cpu.growth_tracker()) << k;
  }
  EXPECT_TRUE(same_values(p.gpu, p.cpu, kRtol, kAtol));
}

TEST_F(OptimCudaParity, ClipGradNormAcrossLaunches) {
  for (double max_norm : {1.0, 1e9}) {  // clipping, and a coefficient of exactly 1
    Twin p(many_sizes());
    p.set_grads(4, 6);
    Tensor norm_gpu = clip_grad_norm_(p.gpu, max_norm);
    Tensor norm_cpu = clip_grad_norm_(p.cpu, max_norm);
    EXPECT_EQ(norm_gpu.device(), kGpu);
    EXPECT_TRUE(all_close(norm_gpu, norm_cpu, 0, 1e-5)) << max_norm;
    for (size_t i = 0; i < p.cpu.size(); ++i) {
      if (!p.cpu[i].grad().defined()) continue;
      EXPECT_TRUE(all_close(p.gpu[i].grad(), p.cpu[i].grad(), 1e-9, 1e-5)) << i;
    }
  }
}

TEST_F(OptimCudaParity, ClipGradNormIsDeterministic) {
  Twin p(many_sizes());
  p.set_grads(5);
  const double first = clip_grad_norm_(p.gpu, 1e30).item();  // coefficient 1: gradients unchanged
  for (int run = 0; run < 5; ++run) EXPECT_EQ(clip_grad_norm_(p.gpu, 1e30).item(), first);
}

}  // namespace
}  // namespace tandem::optim
