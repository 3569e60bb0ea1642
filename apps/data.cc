// `tandem data`: look at a dataset before training on it.
//
//   tandem data fortunes [--dir D]             the fortune categories with their entry counts
//   tandem data summary --format F [--path P]  reads (and so validates) a dataset and prints its
//                                              classes, the majority-class baseline, token lengths
//                                              and what padding each batch to its longest text saves
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/check.h"
#include "data/dataset_spec.h"
#include "data/batch_padding.h"
#include "data/fortunes.h"
#include "data/length_grouping.h"
#include "data/permutation.h"
#include "data/tokenizer.h"

namespace tandem::apps {

namespace {

// What padding costs at max_seq_len (rows `lengths`, already capped): the real share of full-length
// rows, and the mean row when batches of `batch` are cut to their longest (data.padding longest),
// in one shuffled epoch and grouped by length (group_by_length).
std::string padding_summary(const std::vector<int64_t>& lengths, int64_t max_seq_len, int64_t batch) {
  const auto n = static_cast<int64_t>(lengths.size());
  double real = 0;
  for (int64_t l : lengths) real += static_cast<double>(l);
  real /= static_cast<double>(n);
  const std::vector<int64_t> order = data::seeded_permutation(n, 0, 0);
  const double longest = data::mean_longest_row(order, lengths, batch);
  const double grouped = data::mean_longest_row(data::group_by_length(order, lengths, batch), lengths, batch);
  auto pct = [&](double row) { return 100.0 * real / row; };
  return fmt::format(
      "  padding, batches of {}: rows of max_seq_len {} are {:.1f}% real tokens; cut to each batch's longest "
      "(data.padding longest) the mean row is {:.1f} ({:.1f}% real); grouped by length as well, {:.1f} ({:.1f}% real)\n",
      batch, max_seq_len, pct(static_cast<double>(max_seq_len)), longest, pct(longest), grouped, pct(grouped));
}

// Token counts per text ([CLS] included), how many a max_seq_len would cut, and what padding costs.
std::string length_summary(const data::Dataset& d, int64_t max_seq_len, int64_t batch) {
  std::vector<int64_t> lengths;  // in the data set's order
  lengths.reserve(d.examples.size());
  for (const auto& e : d.examples) {
    int64_t n = 1;
    data::for_each_token(e.text, [&](std::string_view) { ++n; });
    lengths.push_back(n);
  }
  if (lengths.empty()) return "";
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) { return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))]; };
  const auto cut = std::count_if(sorted.begin(), sorted.end(), [&](int64_t n) { return n > max_seq_len; });
  for (int64_t& n : lengths) n = std::min(n, max_seq_len);
  return fmt::format(
             "  tokens per text ([CLS] included): median {}, p90 {}, p99 {}, max {}; {} of {} ({:.1f}%) "
             "longer than max_seq_len {}\n",
             at(0.5), at(0.9), at(0.99), sorted.back(), cut, sorted.size(),
             100.0 * static_cast<double>(cut) / static_cast<double>(sorted.size()), max_seq_len) +
         padding_summary(lengths, max_seq_len, batch);
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Inspect datasets: fortune categories, class counts, baselines");
  cmd->require_subcommand(1);

  auto* fortunes = cmd->add_subcommand("fortunes", "List the fortune categories (Debian 'fortunes' package)");
  auto fortunes_dir = std::make_shared<std::string>(data::kDefaultFortunesDir.string());
  fortunes->add_option("--dir", *fortunes_dir, "Fortunes folder")->capture_default_str();
  fortunes->callback([fortunes_dir] {
    fmt::print("{}", data::describe_fortune_categories(*fortunes_dir));
    fmt::print("demo categories: {}\n", fmt::join(data::default_fortune_categories(), ", "));
  });

  auto* summary = cmd->add_subcommand("summary", "Read a dataset, report bad records, print classes and baselines");
  auto spec = std::make_shared<data::DatasetSpec>();
  auto path = std::make_shared<std::string>();
  auto max_seq_len = std::make_shared<int64_t>(128);
  auto batch = std::make_shared<int64_t>(32);
  summary->add_option("--format", spec->format, "ag_news | imdb | jsonl | tsv | fortunes")->required();
  summary->add_option("--path", *path, "File, aclImdb folder or fortunes folder");
  summary->add_option("--split", spec->split, "imdb / fortunes: train or test (fortunes: both when omitted)");
  summary->add_option("--categories", spec->categories, "fortunes: categories (default: the demo's)")->delimiter(',');
  summary->add_option("--class-names", spec->class_names, "Fixed class names")->delimiter(',');
  summary->add_option("--text-field", spec->text_field, "jsonl: text field")->capture_default_str();
  summary->add_option("--label-field", spec->label_field, "jsonl: label field")->capture_default_str();
  summary->add_option("--test-fraction", spec->test_fraction, "fortunes: held-out share")->capture_default_str();
  // CLI11 reads "-1" into the unsigned seed as 2^64 - 1; say so instead.
  const CLI::Validator non_negative(
      [](std::string& text) { return text.starts_with('-') ? "must be a non-negative integer, got " + text : ""; },
      "SEED");
  summary->add_option("--seed", spec->split_seed, "fortunes: split seed")->check(non_negative)->capture_default_str();
  summary->add_option("--max-seq-len", *max_seq_len, "Report how many texts this length truncates")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  summary->add_option("--batch-size", *batch, "Batch size for the padding estimate (per_device_train_batch_size)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  summary->callback([summary, spec, path, max_seq_len, batch] {
    // Only fortunes has a default folder; elsewhere an empty path failed as "<nothing>: no such file".
    TANDEM_CHECK(!path->empty() || spec->format == "fortunes", "data summary: --format {} needs --path",
                 spec->format);
    spec->path = *path;
    std::vector<std::string> splits{spec->split};
    if (spec->format == "fortunes" && summary->count("--split") == 0) splits = {"train", "test"};
    for (const auto& split : splits) {
      data::DatasetSpec s = *spec;
      s.split = split;
      data::Dataset d = data::load_dataset(s);
      d.validate();
      fmt::print("{}", data::describe(d, fmt::format("{} {}", s.format, split)));
      fmt::print("{}", length_summary(d, *max_seq_len, *batch));
    }
  });
}

}  // namespace tandem::apps
