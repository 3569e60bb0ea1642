// One entry point to every reader: what a config's data section names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/csv_dataset.h"
#include "data/dataset.h"

namespace tandem::data {

struct DatasetSpec {
  std::string format;           // "ag_news", "csv", "imdb", "jsonl", "tsv" or "fortunes"
  std::filesystem::path path;   // the file; the aclImdb folder (imdb); the fortunes folder (fortunes, empty: default)
  std::string split = "train";  // imdb and fortunes: "train" or "test"
  // Fixes the label set: the names of labels 1..n (ag_news), the classes of a CSV/JSONL/TSV
  // file (pass the train split's to read its test split). Empty: the reader's default.
  std::vector<std::string> class_names;
  std::string text_field = "text", label_field = "label";      // jsonl
  int64_t label_column = 0, text_column = 1, num_columns = 2;  // tsv
  bool header = false;                                         // tsv and csv
  CsvDatasetOptions csv;  // csv: delimiter, label and text columns (header and class_names come from above)
  std::vector<std::string> categories;  // fortunes; empty: default_fortune_categories()
  double test_fraction = 0.1;           // fortunes: the share of each category held out
  uint64_t split_seed = 0;              // fortunes: seeds the stratified split
};

// Reads the dataset `spec` describes; unknown formats and bad options are errors naming them.
Dataset load_dataset(const DatasetSpec& spec);

}  // namespace tandem::data
