// Learning-rate schedules with warm-up, as Hugging Face transformers defines
// them (get_scheduler / lr_scheduler_type): the learning rate of a group at
// optimizer step k is base_lr * lr_factor(config, k), a pure function of k.
//
//   constant              1
//   constant_with_warmup  k / warmup while k < warmup, then 1
//   linear                k / warmup, then (total - k) / (total - warmup), floored at 0
//   cosine                k / warmup, then max(0, 0.5 * (1 + cos(pi * 2 * num_cycles * progress))),
//                         progress = (k - warmup) / (total - warmup); past the end the
//                         wave continues, exactly as in transformers
//
// Warm-up steps are warmup_steps if positive, else ceil(warmup_ratio * total)
// (TrainingArguments.get_warmup_steps). LRScheduler applies a schedule to an
// optimizer the way torch.optim.lr_scheduler.LambdaLR does: the constructor
// sets factor(0) (so the first step of a warm-up runs at lr 0, as in the
// Trainer), and each step() after an optimizer step moves to the next k.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "optim/optimizer.h"

namespace tandem::optim {

enum class ScheduleKind { Constant, ConstantWithWarmup, Linear, Cosine };

// Parses Hugging Face's lr_scheduler_type names: "constant", "constant_with_warmup", "linear", "cosine".
ScheduleKind parse_schedule_kind(std::string_view name);
std::string_view schedule_kind_name(ScheduleKind kind);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::Linear;
  int64_t num_training_steps = 0;  // required by linear and cosine
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;  // used when warmup_steps is 0
  double num_cycles = 0.5;    // cosine: half a cosine wave, from 1 down to 0
};

// Throws Error naming the field for a negative count, a ratio outside [0, 1],
// or a linear/cosine schedule without num_training_steps.
void validate(const ScheduleConfig& config);
int64_t warmup_steps(const ScheduleConfig& config);
double lr_factor(const ScheduleConfig& config, int64_t step);

class LRScheduler {
 public:
  // Remembers each group's current lr as its base lr and sets lr = base * factor(0).
  LRScheduler(Optimizer& optimizer, ScheduleConfig config);
  // After an optimizer step: k += 1 and lr = base * factor(k) for every group.
  void step();
  int64_t last_step() const { return step_; }
  std::vector<double> last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // Resumes at step k (for checkpoints): lr = base * factor(k).
  void set_step(int64_t step);

 private:
  void apply();

  Optimizer& optimizer_;
  ScheduleConfig config_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};

}  // namespace tandem::optim
