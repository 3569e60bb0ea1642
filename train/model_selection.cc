#include "train/model_selection.h"

#include "core/check.h"

namespace tandem::train {

namespace {

std::string without_prefix(const std::string& metric) {
  return metric.rfind("eval_", 0) == 0 ? metric.substr(5) : metric;
}

}  // namespace

ModelSelection::ModelSelection(const std::string& metric, int64_t patience, double threshold)
    : metric_(without_prefix(metric)), patience_(patience), threshold_(threshold) {
  TANDEM_CHECK(metric_ == "loss" || metric_ == "accuracy" || metric_ == "macro_f1",
               "metric_for_best_model: '{}' is not one of loss, accuracy, macro_f1", metric);
  TANDEM_CHECK(patience_ >= 0 && threshold_ >= 0, "early stopping: patience {} and threshold {} must be >= 0",
               patience_, threshold_);
}

double ModelSelection::value_of(const std::string& metric, const EvalResult& e) {
  const std::string m = without_prefix(metric);
  if (m == "loss") return e.loss;
  if (m == "accuracy") return e.accuracy;
  if (m == "macro_f1") return e.macro_f1;
  TANDEM_FAIL("metric_for_best_model: '{}' is not one of loss, accuracy, macro_f1", metric);
}

bool ModelSelection::observe(int64_t step, const EvalResult& e) {
  const double v = value_of(metric_, e);
  if (!best_step_) {
    best_step_ = step;
    best_value_ = v;
    return true;
  }
  const double gain = greater_is_better() ? v - best_value_ : best_value_ - v;
  without_improvement_ = gain > threshold_ ? 0 : without_improvement_ + 1;
  if (gain <= 0) return false;
  best_step_ = step;
  best_value_ = v;
  return true;
}

}  // namespace tandem::train
