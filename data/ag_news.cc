#include "data/ag_news.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/check.h"
#include "data/csv.h"
#include "data/labels.h"
#include "data/text_file.h"

namespace tandem::data {

namespace {
bool is_header_name(std::string_view field) {
  std::string lower(trim(field));
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower == "class index" || lower == "class" || lower == "label";
}
}  // namespace

Dataset read_ag_news_csv(const std::filesystem::path& path, const AgNewsOptions& options) {
  TANDEM_CHECK(!options.class_names.empty(), "AG News: class_names must not be empty");
  const std::string text = read_text_file(path);
  const auto num_classes = static_cast<int64_t>(options.class_names.size());
  Dataset dataset;
  dataset.class_names = options.class_names;
  bool first = true;
  for_each_csv_record(text, path, [&](const CsvRecord& r) {
    const bool is_first = std::exchange(first, false);
    if (is_first && !r.fields.empty() && is_header_name(r.fields[0])) return;
    const std::string where = location(path, r.line);
    if (r.fields.size() != 3)
      throw_input_error(where,
                        fmt::format("expected 3 columns (class, title, description), found {}", r.fields.size()));
    auto label = parse_integer(trim(r.fields[0]));
    if (!label) throw_input_error(where, fmt::format("label '{}' is not an integer", r.fields[0]));
    if (*label < 1 || *label > num_classes)
      throw_input_error(where,
                        fmt::format("label {} is outside 1..{} (AG News labels are 1-based)", *label, num_classes));
    std::string_view title = trim(r.fields[1]), description = trim(r.fields[2]);
    if (title.empty() && description.empty())
      throw_input_error(where, "empty text (title and description are both empty)");
    std::string joined(title);
    if (!title.empty() && !description.empty()) joined += ' ';
    joined += description;
    dataset.examples.push_back({std::move(joined), static_cast<int32_t>(*label - 1), where});
  });
  return dataset;
}

}  // namespace tandem::data
