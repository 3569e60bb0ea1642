// The AG News CSV family (AG News, DBpedia, Yahoo Answers, Yelp, Amazon as
// distributed by Zhang et al. 2015): one record per document, the first column a
// 1-based class number, then one or more text columns (AG News: title,
// description; Yahoo Answers: question title, question content, best answer;
// Yelp: review). Every record of a file has as many columns as the first one.
//
// The text of an example is its non-empty text columns, trimmed, joined with a
// space. Class names come from the options; without them the classes are
// "1".."N", N the largest label in the file. A first record whose first column
// is a header name ("Class Index", "class", "label") is skipped, which covers the
// Kaggle copies of these data sets.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

// AG News's own class names, for labels 1..4.
std::vector<std::string> ag_news_class_names();

struct AgNewsOptions {
  // Label k in the file (1-based) is class_names[k - 1]; their count bounds the labels.
  // Empty: "1".."N" for the largest label N seen (pass the train split's to read its test split).
  std::vector<std::string> class_names;
};

// Throws an input error naming path:line for fewer than 2 columns or a column count
// different from the first record's, a label that is not an integer in 1..N, all text
// columns empty, a CSV quoting error, invalid UTF-8, or a missing file.
Dataset read_ag_news_csv(const std::filesystem::path& path, const AgNewsOptions& options = {});

}  // namespace tandem::data
