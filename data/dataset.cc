#include "data/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "data/permutation.h"
#include "data/text_file.h"

namespace tandem::data {

std::vector<int64_t> Dataset::class_counts() const {
  std::vector<int64_t> counts(class_names.size(), 0);
  for (const Example& e : examples) {
    TANDEM_CHECK(e.label >= 0 && e.label < num_classes(), "{}: label {} outside [0, {})", e.source, e.label,
                 num_classes());
    ++counts[static_cast<size_t>(e.label)];
  }
  return counts;
}

double Dataset::majority_fraction() const {
  if (examples.empty()) return 0.0;
  auto counts = class_counts();
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) / static_cast<double>(size());
}

void Dataset::validate() const {
  for (const Example& e : examples) {
    if (e.label < 0 || e.label >= num_classes())
      throw_input_error(e.source, fmt::format("label {} is outside [0, {})", e.label, num_classes()));
    if (trim(e.text).empty()) throw_input_error(e.source, "empty text");
  }
}

std::pair<Dataset, Dataset> split_train_test(const Dataset& dataset, double test_fraction, uint64_t seed) {
  TANDEM_CHECK(test_fraction >= 0.0 && test_fraction <= 1.0, "test_fraction must be in [0, 1], got {}", test_fraction);
  std::vector<std::vector<size_t>> by_class(dataset.class_names.size());
  for (size_t i = 0; i < dataset.examples.size(); ++i) {
    int32_t label = dataset.examples[i].label;
    TANDEM_CHECK(label >= 0 && label < dataset.num_classes(), "{}: label {} outside [0, {})",
                 dataset.examples[i].source, label, dataset.num_classes());
    by_class[static_cast<size_t>(label)].push_back(i);
  }
  std::vector<char> to_test(dataset.examples.size(), 0);
  for (size_t c = 0; c < by_class.size(); ++c) {
    const auto& members = by_class[c];
    const auto n_test = static_cast<int64_t>(std::llround(static_cast<double>(members.size()) * test_fraction));
    // One Philox stream per class: a class's split does not depend on the others.
    auto perm = seeded_permutation(static_cast<int64_t>(members.size()), seed, c);
    for (int64_t k = 0; k < n_test; ++k) to_test[members[static_cast<size_t>(perm[static_cast<size_t>(k)])]] = 1;
  }
  Dataset train, test;
  train.class_names = test.class_names = dataset.class_names;
  for (size_t i = 0; i < dataset.examples.size(); ++i)
    (to_test[i] ? test : train).examples.push_back(dataset.examples[i]);
  return {std::move(train), std::move(test)};
}

std::string describe(const Dataset& dataset, std::string_view name) {
  std::string out = fmt::format("{}: {} examples, {} classes\n", name, dataset.size(), dataset.num_classes());
  auto counts = dataset.class_counts();
  size_t width = 5;
  for (const auto& c : dataset.class_names) width = std::max(width, c.size());
  for (size_t c = 0; c < counts.size(); ++c) {
    double share = dataset.size() ? 100.0 * static_cast<double>(counts[c]) / static_cast<double>(dataset.size()) : 0;
    out += fmt::format("  {:>2} {:<{}} {:>8} {:>6.1f}%\n", c, dataset.class_names[c], width, counts[c], share);
  }
  out += fmt::format("  majority-class baseline accuracy: {:.1f}%\n", 100.0 * dataset.majority_fraction());
  return out;
}

}  // namespace tandem::data
