// A labelled text-classification dataset, as every reader returns it.
//
// Labels are 0-based class indices into class_names. Each example keeps the
// location it was read from ("path:line"), so any later complaint about it
// (an empty text after cleaning, a label the model cannot take) names the
// record in the user's file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::data {

struct Example {
  std::string text;
  int32_t label = 0;   // 0-based index into Dataset::class_names
  std::string source;  // "path:line" of the record
};

struct Dataset {
  std::vector<Example> examples;
  std::vector<std::string> class_names;  // label i is class_names[i]

  int64_t size() const { return static_cast<int64_t>(examples.size()); }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
  std::vector<int64_t> class_counts() const;  // examples per label
  // The share of the most frequent class: the accuracy of always predicting it.
  double majority_fraction() const;
  // Every label lies in [0, num_classes) and every text is non-empty; throws naming the source otherwise.
  void validate() const;
};

// Splits per class (stratified): of each class's n examples, round(n * test_fraction)
// chosen by a seeded permutation go to the test set. Both halves keep the input order
// and the class names. The same (dataset, fraction, seed) always gives the same split.
std::pair<Dataset, Dataset> split_train_test(const Dataset& dataset, double test_fraction, uint64_t seed);

// A few lines for logs and the CLI: size, each class with its count and share,
// and the majority-class baseline.
std::string describe(const Dataset& dataset, std::string_view name);

}  // namespace tandem::data
