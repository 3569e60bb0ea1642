// Tab-separated values: by default two columns, label<TAB>text.
//
// Fields cannot contain tabs or newlines (the IANA TSV definition: no quoting),
// so every line is one record. Labels follow LabelResolver (data/labels.h):
// 0-based integers or class names. Blank lines are skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

struct TsvOptions {
  int64_t label_column = 0;
  int64_t text_column = 1;
  int64_t num_columns = 2;               // every line must have exactly this many columns
  bool header = false;                   // the first line names the columns and is skipped
  std::vector<std::string> class_names;  // empty: inferred from the labels
};

// Throws an input error naming path:line for a wrong column count, a bad or
// out-of-range label, an empty text, invalid UTF-8, or a missing file.
Dataset read_tsv(const std::filesystem::path& path, const TsvOptions& options = {});

}  // namespace tandem::data
