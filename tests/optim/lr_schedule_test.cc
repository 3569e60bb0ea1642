// LR schedules: values the formulas give by hand, and LRScheduler against
// torch.optim.lr_scheduler.LambdaLR driven by the Hugging Face schedule
// lambdas (tests/fixtures/optim/lr_schedules.json). Both sides compute the
// same double expression, so the comparison is to 1e-15 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "tests/optim/torch_fixture.h"

namespace tandem::optim {
namespace {

TEST(LrSchedule, LinearWarmupThenLinearDecayToZero) {
  ScheduleConfig c{.kind = ScheduleKind::Linear, .num_training_steps = 100, .warmup_steps = 10};
  EXPECT_EQ(lr_factor(c, 0), 0.0);
  EXPECT_EQ(lr_factor(c, 5), 0.5);
  EXPECT_EQ(lr_factor(c, 10), 1.0);
  EXPECT_EQ(lr_factor(c, 55), 0.5);
  EXPECT_EQ(lr_factor(c, 100), 0.0);
  EXPECT_EQ(lr_factor(c, 150), 0.0);
}

TEST(LrSchedule, CosineWarmupThenHalfCosineToZero) {
  ScheduleConfig c{.kind = ScheduleKind::Cosine, .num_training_steps = 110, .warmup_steps = 10};
  EXPECT_EQ(lr_factor(c, 5), 0.5);
  EXPECT_EQ(lr_factor(c, 10), 1.0);
  EXPECT_NEAR(lr_factor(c, 35), 0.5 * (1 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_NEAR(lr_factor(c, 60), 0.5, 1e-15);
  EXPECT_NEAR(lr_factor(c, 110), 0.0, 1e-15);
  // Past the end the cosine turns up again, as in transformers (only negative values are clamped).
  EXPECT_NEAR(lr_factor(c, 120), 0.5 * (1 + std::cos(M_PI * 1.1)), 1e-15);
}

TEST(LrSchedule, ConstantSchedules) {
  ScheduleConfig c{.kind = ScheduleKind::ConstantWithWarmup, .warmup_steps = 4};
  EXPECT_EQ(lr_factor(c, 1), 0.25);
  EXPECT_EQ(lr_factor(c, 4), 1.0);
  EXPECT_EQ(lr_factor(c, 1000), 1.0);
  c.kind = ScheduleKind::Constant;
  EXPECT_EQ(lr_factor(c, 0), 1.0);
}

TEST(LrSchedule, WarmupRatioRoundsUp) {
  ScheduleConfig c{.kind = ScheduleKind::Linear, .num_training_steps = 50, .warmup_ratio = 0.06};
  EXPECT_EQ(warmup_steps(c), 3);
  c.warmup_steps = 7;  // explicit steps win, as in TrainingArguments
  EXPECT_EQ(warmup_steps(c), 7);
}

TEST(LrSchedule, ParsesHuggingFaceNames) {
  EXPECT_EQ(parse_schedule_kind("cosine"), ScheduleKind::Cosine);
  EXPECT_EQ(parse_schedule_kind("constant_with_warmup"), ScheduleKind::ConstantWithWarmup);
  EXPECT_THROW(parse_schedule_kind("cosine_with_restarts"), Error);
}

TEST(LrSchedule, RejectsBadConfigs) {
  EXPECT_THROW(validate({.kind = ScheduleKind::Linear}), Error);  // no num_training_steps
  EXPECT_THROW(validate({.kind = ScheduleKind::Constant, .warmup_steps = -1}), Error);
  EXPECT_THROW(validate({.kind = ScheduleKind::Constant, .warmup_ratio = 1.5}), Error);
}

TEST(LrScheduler, MatchesLambdaLRWithHuggingFaceLambdas) {
  const nlohmann::json fixture = testing::load_optim_fixture("lr_schedules.json");
  ASSERT_FALSE(fixture["cases"].empty());
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["lr_scheduler_type"].get<std::string>() + " total " + c["num_training_steps"].dump());
    std::vector<SGD::ParamGroup> groups;
    for (const auto& lr : c["base_lrs"])
      groups.push_back({{Tensor::zeros({1}).set_requires_grad(true)}, {.lr = lr.get<double>()}});
    SGD opt(groups);
    LRScheduler sched(opt, {.kind = parse_schedule_kind(c["lr_scheduler_type"].get<std::string>()),
                            .num_training_steps = c["num_training_steps"],
                            .warmup_steps = c["warmup_steps"],
                            .warmup_ratio = c["warmup_ratio"]});
    for (size_t k = 0; k < c["lrs"].size(); ++k) {
      if (k > 0) sched.step();
      for (size_t g = 0; g < groups.size(); ++g) {
        const double expected = c["lrs"][k][g];
        EXPECT_NEAR(opt.lr(g), expected, 1e-15 * std::fabs(expected)) << "step " << k << " group " << g;
      }
    }
  }
}

TEST(LrScheduler, SetStepResumesTheSchedule) {
  SGD opt({Tensor::zeros({1}).set_requires_grad(true)}, {.lr = 0.1});
  LRScheduler sched(opt, {.kind = ScheduleKind::Linear, .num_training_steps = 10, .warmup_steps = 2});
  EXPECT_EQ(opt.lr(0), 0.0);
  sched.set_step(6);
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.1 * 4.0 / 8.0);
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1}));
}

}  // namespace
}  // namespace tandem::optim
