#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace tandem::optim {

ScheduleKind parse_schedule_kind(std::string_view name) {
  if (name == "constant") return ScheduleKind::Constant;
  if (name == "constant_with_warmup") return ScheduleKind::ConstantWithWarmup;
  if (name == "linear") return ScheduleKind::Linear;
  if (name == "cosine") return ScheduleKind::Cosine;
  TANDEM_FAIL("unknown lr_scheduler_type '{}' (expected constant, constant_with_warmup, linear or cosine)", name);
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::Constant: return "constant";
    case ScheduleKind::ConstantWithWarmup: return "constant_with_warmup";
    case ScheduleKind::Linear: return "linear";
    case ScheduleKind::Cosine: return "cosine";
  }
  return "?";
}

void validate(const ScheduleConfig& c) {
  TANDEM_CHECK(c.warmup_steps >= 0, "lr schedule: warmup_steps must be >= 0, got {}", c.warmup_steps);
  TANDEM_CHECK(c.warmup_ratio >= 0.0 && c.warmup_ratio <= 1.0, "lr schedule: warmup_ratio must be in [0, 1], got {}",
               c.warmup_ratio);
  TANDEM_CHECK(c.num_training_steps >= 0, "lr schedule: num_training_steps must be >= 0, got {}",
               c.num_training_steps);
  const bool decays = c.kind == ScheduleKind::Linear || c.kind == ScheduleKind::Cosine;
  TANDEM_CHECK(!decays || c.num_training_steps > 0, "lr schedule '{}' needs num_training_steps > 0",
               schedule_kind_name(c.kind));
}

int64_t warmup_steps(const ScheduleConfig& c) {
  if (c.warmup_steps > 0) return c.warmup_steps;
  return static_cast<int64_t>(std::ceil(static_cast<double>(c.num_training_steps) * c.warmup_ratio));
}

double lr_factor(const ScheduleConfig& c, int64_t step) {
  const int64_t warmup = warmup_steps(c);
  const auto k = static_cast<double>(step);
  if (c.kind == ScheduleKind::Constant) return 1.0;
  if (step < warmup) return k / static_cast<double>(std::max<int64_t>(1, warmup));
  const auto decay_steps = static_cast<double>(std::max<int64_t>(1, c.num_training_steps - warmup));
  switch (c.kind) {
    case ScheduleKind::ConstantWithWarmup: return 1.0;
    case ScheduleKind::Linear: return std::max(0.0, static_cast<double>(c.num_training_steps - step) / decay_steps);
    case ScheduleKind::Cosine: {
      const double progress = static_cast<double>(step - warmup) / decay_steps;
      return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * c.num_cycles * 2.0 * progress)));
    }
    default: return 1.0;
  }
}

LRScheduler::LRScheduler(Optimizer& optimizer, ScheduleConfig config) : optimizer_(optimizer), config_(config) {
  validate(config_);
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) base_lrs_.push_back(optimizer_.lr(g));
  apply();
}

void LRScheduler::step() {
  ++step_;
  apply();
}

void LRScheduler::set_step(int64_t step) {
  TANDEM_CHECK(step >= 0, "LRScheduler.set_step: step must be >= 0, got {}", step);
  step_ = step;
  apply();
}

std::vector<double> LRScheduler::last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) out.push_back(optimizer_.lr(g));
  return out;
}

void LRScheduler::apply() {
  const double f = lr_factor(config_, step_);
  for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, base_lrs_[g] * f);
}

}  // namespace tandem::optim
