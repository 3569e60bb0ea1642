// GradScaler: the dynamics of dynamic loss scaling (skip on inf/nan with
// params and optimizer state untouched, backoff x0.5, growth x2 exactly after
// growth_interval clean steps), the pass-through for bf16/f32, checkpoint
// state, misuse errors, and a whole scaled AdamW loop against
// torch.amp.GradScaler (tests/fixtures/optim/grad_scaler.json).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/check.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tests/optim/torch_fixture.h"

namespace tandem::optim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor param(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n}).set_requires_grad(true);
}

// loss = sum(w * x): its gradient with respect to w is x (times the scale).
Tensor linear_loss(const Tensor& w, std::vector<double> x) {
  return kernels::sum(kernels::mul(w, Tensor::from_vector(x, w.shape())));
}

// One scaled iteration: zero_grad, scale(loss).backward(), step, update.
void iteration(GradScaler& scaler, Optimizer& opt, const Tensor& w, std::vector<double> x) {
  opt.zero_grad();
  scaler.scale(linear_loss(w, x)).backward();
  scaler.step(opt);
  scaler.update();
}

GradScaler::Options small_interval() { return {.init_scale = 1024.0, .growth_interval = 3}; }

TEST(GradScaler, DefaultsFollowPyTorch) {
  GradScaler::Options o;
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
  EXPECT_EQ(GradScaler().get_scale(), 65536.0);
}

TEST(GradScaler, ScaledLossBackpropagatesScaledGradients) {
  Tensor w = param({1, 2, 3});
  GradScaler scaler(small_interval());
  Tensor scaled = scaler.scale(linear_loss(w, {0.5, -1, 2}));
  EXPECT_EQ(scaled.item(), 1024.0 * (0.5 - 2 + 6));
  scaled.backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{512, -1024, 2048}));
}

TEST(GradScaler, StepLeavesUnscaledGradientsAndUpdatesLikeAnUnscaledStep) {
  Tensor w = param({1, 2, 3}), w_ref = param({1, 2, 3});
  SGD opt({w}, {.lr = 0.1, .momentum = 0.9}), ref({w_ref}, {.lr = 0.1, .momentum = 0.9});
  GradScaler scaler(small_interval());
  for (int k = 0; k < 3; ++k) {
    iteration(scaler, opt, w, {0.5, -1, 2});
    ref.zero_grad();
    linear_loss(w_ref, {0.5, -1, 2}).backward();
    ref.step();
  }
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{0.5, -1, 2}));
  EXPECT_EQ(w.to_double_vector(), w_ref.to_double_vector());
}

TEST(GradScaler, InfGradientSkipsTheStepAndHalvesTheScale) {
  Tensor w = param({1, 2, 3});
  AdamW opt({w});
  GradScaler scaler(small_interval());
  iteration(scaler, opt, w, {1, 1, 1});  // a clean step first, so there is state to protect
  const std::vector<double> params = w.to_double_vector();
  std::map<std::string, std::vector<double>> state;
  for (const auto& [k, t] : opt.state_dict()) state[k] = t.to_double_vector();
  ASSERT_EQ(scaler.growth_tracker(), 1);

  iteration(scaler, opt, w, {1, kInf, 1});

  EXPECT_EQ(w.to_double_vector(), params);
  for (const auto& [k, t] : opt.state_dict()) EXPECT_EQ(t.to_double_vector(), state[k]) << k;
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 1.0);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, NanGradientSkipsTheStepAndHalvesTheScale) {
  Tensor w = param({1, 2, 3});
  SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  GradScaler scaler(small_interval());
  iteration(scaler, opt, w, {1, 1, 1});
  const std::vector<double> params = w.to_double_vector();
  const std::vector<double> buffer = opt.state_dict().at("state.0.momentum_buffer").to_double_vector();

  iteration(scaler, opt, w, {kNan, 1, 1});

  EXPECT_EQ(w.to_double_vector(), params);
  EXPECT_EQ(opt.state_dict().at("state.0.momentum_buffer").to_double_vector(), buffer);
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

TEST(GradScaler, SkippedFirstStepLeavesTheMomentumBufferToTheNextStep) {
  Tensor w = param({1, 2}), w_ref = param({1, 2});
  SGD opt({w}, {.lr = 0.1, .momentum = 0.9}), ref({w_ref}, {.lr = 0.1, .momentum = 0.9});
  GradScaler scaler(small_interval());
  iteration(scaler, opt, w, {kInf, 1});
  iteration(scaler, opt, w, {2, 3});
  linear_loss(w_ref, {2, 3}).backward();
  ref.step();
  EXPECT_EQ(w.to_double_vector(), w_ref.to_double_vector());
  EXPECT_EQ(opt.state_dict().at("state.0.momentum_buffer").to_double_vector(),
            ref.state_dict().at("state.0.momentum_buffer").to_double_vector());
}

TEST(GradScaler, ScaleDoublesExactlyAfterGrowthIntervalCleanSteps) {
  Tensor w = param({1, 2});
  SGD opt({w}, {.lr = 0.01});
  GradScaler scaler(small_interval());
  const std::vector<std::pair<double, int64_t>> expected = {{1024, 1}, {1024, 2}, {2048, 0}, {2048, 1}};
  for (const auto& [scale, tracker] : expected) {
    iteration(scaler, opt, w, {1, 1});
    EXPECT_EQ(scaler.get_scale(), scale);
    EXPECT_EQ(scaler.growth_tracker(), tracker);
  }
}

TEST(GradScaler, InfResetsTheGrowthCount) {
  Tensor w = param({1, 2});
  SGD opt({w}, {.lr = 0.01});
  GradScaler scaler(small_interval());
  iteration(scaler, opt, w, {1, 1});
  iteration(scaler, opt, w, {1, 1});
  iteration(scaler, opt, w, {kInf, 1});  // would have been the third clean step
  EXPECT_EQ(scaler.get_scale(), 512.0);
  iteration(scaler, opt, w, {1, 1});
  iteration(scaler, opt, w, {1, 1});
  EXPECT_EQ(scaler.get_scale(), 512.0);
  iteration(scaler, opt, w, {1, 1});
  EXPECT_EQ(scaler.get_scale(), 1024.0);
}

TEST(GradScaler, GrowthThatWouldOverflowKeepsTheScale) {
  Tensor w = param({1});
  SGD opt({w}, {.lr = 0.01});
  GradScaler scaler({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  iteration(scaler, opt, w, {1e-30});
  EXPECT_EQ(scaler.get_scale(), std::ldexp(1.0, 127));
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, InfInOneOptimizerSkipsOnlyItsStepButBacksOff) {
  Tensor a = param({1, 2}), b = param({3, 4});
  SGD opt_a({a}, {.lr = 0.5}), opt_b({b}, {.lr = 0.5});
  GradScaler scaler(small_interval());
  Tensor loss = kernels::add(linear_loss(a, {kInf, 1}), linear_loss(b, {1, 1}));
  scaler.scale(loss).backward();
  scaler.step(opt_a);
  scaler.step(opt_b);
  scaler.update();
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{1, 2}));
  EXPECT_EQ(b.to_double_vector(), (std::vector<double>{2.5, 3.5}));
  EXPECT_EQ(scaler.get_scale(), 512.0);
}

TEST(GradScaler, ClippingAfterUnscaleSeesTheTrueGradients) {
  Tensor w = param({0, 0});
  SGD opt({w}, {.lr = 1.0});
  GradScaler scaler(small_interval());
  scaler.scale(linear_loss(w, {3, 4})).backward();
  scaler.unscale_(opt);
  EXPECT_NEAR(clip_grad_norm_({w}, 1.0).item(), 5.0, 1e-6);
  scaler.step(opt);  // no second unscale
  scaler.update();
  const std::vector<double> p = w.to_double_vector();
  EXPECT_NEAR(p[0], -0.6, 1e-6);
  EXPECT_NEAR(p[1], -0.8, 1e-6);
}

TEST(GradScaler, DisabledForBf16AndF32IsAPassThrough) {
  for (DType t : {DType::BF16, DType::F32}) {
    GradScaler scaler = GradScaler::for_compute_dtype(t);
    EXPECT_FALSE(scaler.enabled());
    Tensor w = param({1, 2}), w_ref = param({1, 2});
    SGD opt({w}, {.lr = 0.1}), ref({w_ref}, {.lr = 0.1});
    Tensor loss = linear_loss(w, {1, -1});
    EXPECT_TRUE(scaler.scale(loss).is_same(loss));
    iteration(scaler, opt, w, {1, -1});
    linear_loss(w_ref, {1, -1}).backward();
    ref.step();
    EXPECT_EQ(w.to_double_vector(), w_ref.to_double_vector());
    EXPECT_EQ(scaler.get_scale(), 1.0);
    EXPECT_FALSE(scaler.state_dict().has_value());
  }
  EXPECT_TRUE(GradScaler::for_compute_dtype(DType::F16).enabled());
}

TEST(GradScaler, StateDictRestoresScaleAndGrowthTracker) {
  Tensor w = param({1});
  SGD opt({w}, {.lr = 0.01});
  GradScaler scaler(small_interval());
  iteration(scaler, opt, w, {1});
  iteration(scaler, opt, w, {1});
  iteration(scaler, opt, w, {kInf});
  iteration(scaler, opt, w, {1});
  const GradScaler::State s = scaler.state_dict().value();
  EXPECT_EQ(s.scale, 512.0);
  EXPECT_EQ(s.growth_tracker, 1);
  EXPECT_EQ(s.growth_interval, 3);

  GradScaler resumed;  // defaults, replaced by the checkpoint
  resumed.load_state_dict(s);
  EXPECT_EQ(resumed.get_scale(), 512.0);
  iteration(resumed, opt, w, {1});
  iteration(resumed, opt, w, {1});
  EXPECT_EQ(resumed.get_scale(), 1024.0);  // tracker 1 + 2 clean steps = interval 3
}

TEST(GradScaler, MisuseIsAClearError) {
  Tensor w = param({1});
  SGD opt({w});
  GradScaler scaler;
  EXPECT_THROW(scaler.unscale_(opt), Error);  // before scale()
  scaler.scale(linear_loss(w, {1})).backward();
  EXPECT_THROW(scaler.update(), Error);  // no step recorded
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), Error);
  scaler.step(opt);
  EXPECT_THROW(scaler.step(opt), Error);
  EXPECT_THROW(scaler.unscale_(opt), Error);
  scaler.update();
  EXPECT_THROW(GradScaler({.growth_factor = 1.0}), Error);
  EXPECT_THROW(GradScaler({.backoff_factor = 1.0}), Error);
  EXPECT_THROW(scaler.load_state_dict({.scale = -1.0}), Error);
}

// A scaled AdamW loop with injected inf and nan, with and without unscale_ +
// clip_grad_norm_, against torch.amp.GradScaler: the scale used each
// iteration, the scale and growth tracker after update(), the clip norm and
// the parameters. Tolerance as in optimizer_fixture_test.cc.
TEST(GradScaler, MatchesTorchAmpGradScalerWithInjectedInfAndNan) {
  const nlohmann::json fixture = testing::load_optim_fixture("grad_scaler.json");
  ASSERT_EQ(fixture["cases"].size(), 2u);
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    Tensor w = testing::fixture_tensor(c["initial"][0], {4}).set_requires_grad(true);
    Tensor b = testing::fixture_tensor(c["initial"][1], {3}).set_requires_grad(true);
    AdamW opt({w, b}, {.lr = c["lr"], .weight_decay = c["weight_decay"]});
    GradScaler scaler({.init_scale = c["init_scale"], .growth_factor = c["growth_factor"],
                       .backoff_factor = c["backoff_factor"], .growth_interval = c["growth_interval"]});
    for (size_t k = 0; k < c["iterations"].size(); ++k) {
      const auto& it = c["iterations"][k];
      opt.zero_grad();
      Tensor loss = kernels::add(kernels::sum(kernels::mul(w, testing::fixture_tensor(it["x"], {4}))),
                        kernels::sum(kernels::mul(b, testing::fixture_tensor(it["y"], {3}))));
      scaler.scale(loss).backward();
      if (!c["clip_max_norm"].is_null()) {
        scaler.unscale_(opt);
        Tensor norm = clip_grad_norm_({w, b}, c["clip_max_norm"]);
        if (!it["total_norm"].is_null())
          EXPECT_TRUE(testing::matches_fixture(norm, it["total_norm"], 1e-6, 0)) << "iteration " << k;
        else
          EXPECT_FALSE(std::isfinite(norm.item())) << "iteration " << k;
      }
      EXPECT_EQ(scaler.get_scale(), it["scale_used"].get<double>()) << "iteration " << k;
      scaler.step(opt);
      scaler.update();
      EXPECT_EQ(scaler.get_scale(), it["scale_after"].get<double>()) << "iteration " << k;
      EXPECT_EQ(scaler.growth_tracker(), it["growth_tracker_after"].get<int64_t>()) << "iteration " << k;
      EXPECT_TRUE(testing::matches_fixture(w, it["params"][0], 1e-6, 1e-7)) << "iteration " << k;
      EXPECT_TRUE(testing::matches_fixture(b, it["params"][1], 1e-6, 1e-7)) << "iteration " << k;
    }
  }
}

}  // namespace
}  // namespace tandem::optim
