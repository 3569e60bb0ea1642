// Evaluation of a classifier over one pass of a loader: the loss and accuracy
// a training job logs, per class as well. Runs in eval mode without gradients
// (and so outside DDP: a forward without grad never synchronises).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "data/data_loader.h"
#include "nn/transformer.h"

namespace tandem::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  // Each class's recall (its "accuracy"), precision and F1; 0 where undefined (no such rows, no such predictions).
  std::vector<double> per_class_accuracy, per_class_precision, per_class_f1;
  // The unweighted mean of per-class F1 over the classes that occur in the labels or the predictions,
  // as scikit-learn's f1_score(average="macro").
  double macro_f1 = 0;
  int64_t examples = 0;
};

// Accuracy, per-class recall, precision and F1 and macro-F1 of `predicted` against `labels`
// (class indices in [0, num_classes)); the loss is left at 0.
EvalResult classification_scores(const std::vector<int64_t>& labels, const std::vector<int64_t>& predicted,
                                 int64_t num_classes);

// Loss and classification_scores of `model` over one pass of `loader`;
// the model's train/eval mode is restored afterwards.
EvalResult evaluate(const nn::TextClassifier& model, data::DataLoader& loader, DType compute, int64_t num_classes);

}  // namespace tandem::train
