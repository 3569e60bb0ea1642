// A labelled data set in a general CSV or TSV file: one record per example,
// RFC 4180 quoting (data/csv.h) with any one-character delimiter, a label column
// and one or more text columns, with or without a header line.
//
// Columns are named by their header name (with a header) or by 0-based index;
// with a header, a name that is not in it but is an integer is an index. The text
// of an example is its non-empty text columns, trimmed, joined with a space.
// Labels follow LabelResolver (data/labels.h): class names or 0-based integers.
// Every record must have as many columns as the header (or the first record).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

struct CsvDatasetOptions {
  char delimiter = ',';
  bool header = false;
  std::string label_column = "0";                 // header name or 0-based index
  std::vector<std::string> text_columns = {"1"};  // header names or 0-based indices
  std::vector<std::string> class_names;           // empty: inferred from the labels
};

// Throws an input error naming path:line for an unknown column, a wrong column count,
// a bad label, all text columns empty, a CSV quoting error, invalid UTF-8, or a missing file.
Dataset read_csv_dataset(const std::filesystem::path& path, const CsvDatasetOptions& options = {});

}  // namespace tandem::data
