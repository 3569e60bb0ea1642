// AG News as distributed in CSV (train.csv / test.csv): one record per
// article, three columns "class","title","description", classes 1-based.
//
// The text of an example is title + " " + description. A first record whose
// first column is a header name ("Class Index", "class", "label") is skipped,
// which covers the Kaggle copy of the data set.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

struct AgNewsOptions {
  // Label k in the file (1-based) is class_names[k - 1]; their count bounds the labels.
  std::vector<std::string> class_names = {"World", "Sports", "Business", "Sci/Tech"};
};

// Throws an input error naming path:line for a wrong column count, a label that is
// not an integer in 1..class_names.size(), an empty title and description, a CSV
// quoting error, invalid UTF-8, or a missing file.
Dataset read_ag_news_csv(const std::filesystem::path& path, const AgNewsOptions& options = {});

}  // namespace tandem::data
