#include "data/dataset_spec.h"

#include "core/check.h"
#include "data/ag_news.h"
#include "data/csv_dataset.h"
#include "data/fortunes.h"
#include "data/imdb.h"
#include "data/jsonl.h"
#include "data/tsv.h"

namespace tandem::data {

Dataset load_dataset(const DatasetSpec& spec) {
  if (spec.format == "ag_news") {
    AgNewsOptions options;
    if (!spec.class_names.empty()) options.class_names = spec.class_names;
    return read_ag_news_csv(spec.path, options);
  }
  if (spec.format == "csv") {
    CsvDatasetOptions options = spec.csv;
    options.header = spec.header;
    options.class_names = spec.class_names;
    return read_csv_dataset(spec.path, options);
  }
  if (spec.format == "imdb") return read_imdb(spec.path, spec.split);
  if (spec.format == "jsonl")
    return read_jsonl(spec.path, JsonlOptions{spec.text_field, spec.label_field, spec.class_names});
  if (spec.format == "tsv")
    return read_tsv(spec.path,
                    TsvOptions{spec.label_column, spec.text_column, spec.num_columns, spec.header, spec.class_names});
  if (spec.format == "fortunes") {
    TANDEM_CHECK(spec.split == "train" || spec.split == "test", "fortunes: split must be 'train' or 'test', got '{}'",
                 spec.split);
    auto categories = spec.categories.empty() ? default_fortune_categories() : spec.categories;
    Dataset all = read_fortunes(categories, spec.path.empty() ? kDefaultFortunesDir : spec.path);
    auto [train, test] = split_train_test(all, spec.test_fraction, spec.split_seed);
    return spec.split == "train" ? std::move(train) : std::move(test);
  }
  TANDEM_FAIL("unknown dataset format '{}' (expected ag_news, csv, imdb, jsonl, tsv or fortunes)", spec.format);
}

}  // namespace tandem::data
