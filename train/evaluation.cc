#include "train/evaluation.h"

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "kernels/cross_entropy.h"

namespace tandem::train {

EvalResult classification_scores(const std::vector<int64_t>& labels, const std::vector<int64_t>& predicted,
                                 int64_t num_classes) {
  TANDEM_CHECK(labels.size() == predicted.size(), "scores: {} labels but {} predictions", labels.size(),
               predicted.size());
  const auto n = static_cast<size_t>(num_classes);
  std::vector<int64_t> hits(n, 0), truth(n, 0), guesses(n, 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t y = labels[i], p = predicted[i];
    TANDEM_CHECK(y >= 0 && y < num_classes && p >= 0 && p < num_classes,
                 "scores: row {} has label {} and prediction {}, outside 0..{}", i, y, p, num_classes - 1);
    ++truth[static_cast<size_t>(y)];
    ++guesses[static_cast<size_t>(p)];
    if (y == p) ++hits[static_cast<size_t>(y)];
  }
  auto ratio = [](int64_t a, int64_t b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  EvalResult r;
  r.examples = static_cast<int64_t>(labels.size());
  int64_t all_hits = 0, scored = 0;
  double f1_sum = 0;
  for (size_t k = 0; k < n; ++k) {
    const double recall = ratio(hits[k], truth[k]), precision = ratio(hits[k], guesses[k]);
    const double f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
    r.per_class_accuracy.push_back(recall);
    r.per_class_precision.push_back(precision);
    r.per_class_f1.push_back(f1);
    all_hits += hits[k];
    if (truth[k] + guesses[k] > 0) {
      f1_sum += f1;
      ++scored;
    }
  }
  r.accuracy = ratio(all_hits, r.examples);
  r.macro_f1 = scored ? f1_sum / static_cast<double>(scored) : 0.0;
  return r;
}

EvalResult evaluate(const nn::TextClassifier& model, data::DataLoader& loader, DType compute, int64_t num_classes) {
  NoGradGuard no_grad;
  auto& m = const_cast<nn::TextClassifier&>(model);
  const bool was_training = m.is_training();
  m.train(false);
  double loss_sum = 0;
  std::vector<int64_t> labels, predicted;
  loader.start_epoch(0);
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute;
  while (auto batch = loader.next()) {
    Tensor logits = m.forward(batch->ids, batch->mask, ctx);
    const int64_t n = batch->labels.size(0);
    loss_sum += kernels::cross_entropy(logits, batch->labels).item() * static_cast<double>(n);
    // The predictions on the host (eval batches are few): the arg-max of each row.
    const std::vector<double> l = logits.to_double_vector();
    const std::vector<int64_t> y = batch->labels.to_int_vector();
    for (int64_t i = 0; i < n; ++i) {
      const double* row = l.data() + i * num_classes;
      int64_t best = 0;
      for (int64_t k = 1; k < num_classes; ++k)
        if (row[k] > row[best]) best = k;
      predicted.push_back(best);
      labels.push_back(y[static_cast<size_t>(i)]);
    }
  }
  m.train(was_training);
  EvalResult r = classification_scores(labels, predicted, num_classes);
  r.loss = r.examples ? loss_sum / static_cast<double>(r.examples) : 0;
  return r;
}

}  // namespace tandem::train
