// classification_scores: accuracy, per-class recall/precision/F1 and macro-F1,
// checked against hand-worked examples (scikit-learn's f1_score(average="macro")
// gives the same macro-F1: 0.65556 and 0.6).
#include "train/evaluation.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace tandem::train {
namespace {

TEST(ClassificationScores, PerClassPrecisionRecallAndF1) {
  // class 0: 2 of 3 found, 2 guesses; class 1: 1 of 2, 2 guesses; class 2: 1 of 1, 2 guesses.
  const EvalResult r = classification_scores({0, 0, 0, 1, 1, 2}, {0, 0, 1, 1, 2, 2}, 3);
  EXPECT_EQ(r.examples, 6);
  EXPECT_DOUBLE_EQ(r.accuracy, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.per_class_accuracy[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.per_class_precision[0], 1.0);
  EXPECT_NEAR(r.per_class_f1[0], 0.8, 1e-12);
  EXPECT_NEAR(r.per_class_f1[1], 0.5, 1e-12);
  EXPECT_NEAR(r.per_class_f1[2], 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.macro_f1, (0.8 + 0.5 + 2.0 / 3.0) / 3.0, 1e-12);
}

TEST(ClassificationScores, MacroF1SkipsClassesNeitherSeenNorPredicted) {
  const EvalResult three = classification_scores({0, 0, 0, 1, 1, 2}, {0, 0, 1, 1, 2, 2}, 3);
  const EvalResult five = classification_scores({0, 0, 0, 1, 1, 2}, {0, 0, 1, 1, 2, 2}, 5);
  EXPECT_DOUBLE_EQ(five.macro_f1, three.macro_f1);
  EXPECT_EQ(five.per_class_f1.size(), 5u);
}

TEST(ClassificationScores, MacroF1CountsAClassOnlyPredictedAsZero) {
  // Class 3 is never the label but is predicted once: its F1 is 0 and it counts.
  const EvalResult r = classification_scores({0, 0, 0, 1, 1}, {0, 0, 3, 1, 1}, 4);
  EXPECT_NEAR(r.macro_f1, (0.8 + 1.0 + 0.0) / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.per_class_precision[3], 0.0);
}

TEST(ClassificationScores, RejectsAPredictionOutsideTheClasses) {
  EXPECT_THROW(classification_scores({0, 1}, {0, 2}, 2), Error);
}

TEST(ClassificationScores, RejectsMismatchedLengths) { EXPECT_THROW(classification_scores({0, 1}, {0}, 2), Error); }

}  // namespace
}  // namespace tandem::train
