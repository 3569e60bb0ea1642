// Choosing the model by its evaluations, as Hugging Face's Trainer does with
// load_best_model_at_end / metric_for_best_model and EarlyStoppingCallback.
//
// Each evaluation is observed in order. It is the new best when its metric is
// strictly better than every earlier one (loss: lower; accuracy and macro-F1:
// higher). Early stopping counts the evaluations in a row that did not beat the
// best before them by more than `threshold`; at `patience` it says stop. The
// first evaluation is always the best and never counts against patience.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "train/evaluation.h"

namespace tandem::train {

class ModelSelection {
 public:
  // `metric`: loss | accuracy | macro_f1, optionally prefixed "eval_". `patience` 0: never stop.
  ModelSelection(const std::string& metric, int64_t patience, double threshold);

  // Records the evaluation at `step`; true when it is the best so far.
  bool observe(int64_t step, const EvalResult& e);
  bool should_stop() const { return patience_ > 0 && without_improvement_ >= patience_; }

  const std::string& metric() const { return metric_; }  // without the prefix
  bool greater_is_better() const { return metric_ != "loss"; }
  std::optional<int64_t> best_step() const { return best_step_; }
  double best_value() const { return best_value_; }
  int64_t evaluations_without_improvement() const { return without_improvement_; }

  // The value of `metric` in `e`.
  static double value_of(const std::string& metric, const EvalResult& e);

 private:
  std::string metric_;
  int64_t patience_;
  double threshold_;
  std::optional<int64_t> best_step_;
  double best_value_ = 0;
  int64_t without_improvement_ = 0;
};

}  // namespace tandem::train
