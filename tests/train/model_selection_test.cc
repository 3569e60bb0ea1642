// ModelSelection: the best evaluation and early stopping, as transformers'
// load_best_model_at_end and EarlyStoppingCallback decide them.
#include "train/model_selection.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace tandem::train {
namespace {

EvalResult with(double loss, double accuracy, double macro_f1 = 0) {
  EvalResult e;
  e.loss = loss;
  e.accuracy = accuracy;
  e.macro_f1 = macro_f1;
  return e;
}

TEST(ModelSelection, LossIsBetterLower) {
  ModelSelection s("eval_loss", 0, 0);
  EXPECT_TRUE(s.observe(10, with(1.0, 0.5)));
  EXPECT_TRUE(s.observe(20, with(0.8, 0.4)));
  EXPECT_FALSE(s.observe(30, with(0.9, 0.9)));
  EXPECT_EQ(s.best_step(), 20);
  EXPECT_DOUBLE_EQ(s.best_value(), 0.8);
}

TEST(ModelSelection, AccuracyAndMacroF1AreBetterHigher) {
  ModelSelection acc("accuracy", 0, 0), f1("eval_macro_f1", 0, 0);
  acc.observe(1, with(1.0, 0.5, 0.3));
  f1.observe(1, with(1.0, 0.5, 0.3));
  EXPECT_TRUE(acc.observe(2, with(2.0, 0.6, 0.2)));
  EXPECT_FALSE(f1.observe(2, with(2.0, 0.6, 0.2)));
  EXPECT_EQ(acc.best_step(), 2);
  EXPECT_EQ(f1.best_step(), 1);
}

TEST(ModelSelection, ATieIsNotANewBest) {
  ModelSelection s("accuracy", 0, 0);
  s.observe(1, with(1, 0.5));
  EXPECT_FALSE(s.observe(2, with(1, 0.5)));
  EXPECT_EQ(s.best_step(), 1);
}

TEST(ModelSelection, StopsAfterPatienceEvaluationsWithoutImprovement) {
  ModelSelection s("loss", 2, 0);
  s.observe(1, with(1.0, 0));
  s.observe(2, with(1.1, 0));
  EXPECT_FALSE(s.should_stop());
  s.observe(3, with(0.9, 0));  // improves: the count starts again
  s.observe(4, with(0.95, 0));
  EXPECT_FALSE(s.should_stop());
  s.observe(5, with(0.91, 0));
  EXPECT_TRUE(s.should_stop());
  EXPECT_EQ(s.best_step(), 3);
}

TEST(ModelSelection, AnImprovementWithinTheThresholdCountsAgainstPatienceButIsStillTheBest) {
  ModelSelection s("accuracy", 1, 0.01);
  s.observe(1, with(0, 0.50));
  EXPECT_TRUE(s.observe(2, with(0, 0.505)));  // better, by less than the threshold
  EXPECT_TRUE(s.should_stop());
  EXPECT_EQ(s.best_step(), 2);
}

TEST(ModelSelection, NeverStopsWithoutPatience) {
  ModelSelection s("loss", 0, 0);
  for (int i = 0; i < 10; ++i) s.observe(i, with(1.0 + i, 0));
  EXPECT_FALSE(s.should_stop());
}

TEST(ModelSelection, RejectsAnUnknownMetric) { EXPECT_THROW(ModelSelection("f1_weighted", 0, 0), Error); }

}  // namespace
}  // namespace tandem::train
