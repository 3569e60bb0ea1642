// `tandem data`: look at a dataset before training on it.
//
//   tandem data fortunes [--dir D]             the fortune categories with their entry counts
//   tandem data summary --format F [--path P]  reads (and so validates) a dataset and prints its
//                                              classes, the majority-class baseline and token lengths
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/check.h"
#include "data/dataset_spec.h"
#include "data/fortunes.h"
#include "data/tokenizer.h"

namespace tandem::apps {

namespace {

// Token counts per text ([CLS] included) and how many a max_seq_len would cut.
std::string length_summary(const data::Dataset& d, int64_t max_seq_len) {
  std::vector<int64_t> lengths;
  lengths.reserve(d.examples.size());
  for (const auto& e : d.examples) {
    int64_t n = 1;
    data::for_each_token(e.text, [&](std::string_view) { ++n; });
    lengths.push_back(n);
  }
  if (lengths.empty()) return "";
  std::sort(lengths.begin(), lengths.end());
  auto at = [&](double q) { return lengths[static_cast<size_t>(q * static_cast<double>(lengths.size() - 1))]; };
  const auto cut = std::count_if(lengths.begin(), lengths.end(), [&](int64_t n) { return n > max_seq_len; });
  return fmt::format(
      "  tokens per text ([CLS] included): median {}, p90 {}, p99 {}, max {}; {} of {} ({:.1f}%) "
      "longer than max_seq_len {}\n",
      at(0.5), at(0.9), at(0.99), lengths.back(), cut, lengths.size(),
      100.0 * static_cast<double>(cut) / static_cast<double>(lengths.size()), max_seq_len);
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
  summary->callback([summary, spec, path, max_seq_len] {
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
      fmt::print("{}", length_summary(d, *max_seq_len));
    }
  });
}

}  // namespace tandem::apps
