#include "data/ag_news.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

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

// Large enough for any of these data sets, small enough that "1".."N" stays a sane class list.
constexpr int64_t kMaxClasses = 100000;
}  // namespace

std::vector<std::string> ag_news_class_names() { return {"World", "Sports", "Business", "Sci/Tech"}; }

Dataset read_ag_news_csv(const std::filesystem::path& path, const AgNewsOptions& options) {
  const std::string text = read_text_file(path);
  const bool fixed = !options.class_names.empty();
  const auto num_classes = fixed ? static_cast<int64_t>(options.class_names.size()) : kMaxClasses;
  Dataset dataset;
  int64_t max_label = 0;
  size_t columns = 0;  // of the first record
  bool first = true;
  for_each_csv_record(text, path, [&](const CsvRecord& r) {
    const bool is_first = std::exchange(first, false);
    if (is_first && !r.fields.empty() && is_header_name(r.fields[0])) return;
    const std::string where = location(path, r.line);
    if (columns == 0) {
      if (r.fields.size() < 2)
        throw_input_error(where, fmt::format("expected a class column and at least one text column, found {} column",
                                             r.fields.size()));
      columns = r.fields.size();
    }
    if (r.fields.size() != columns)
      throw_input_error(where,
                        fmt::format("expected {} columns (class, then {} text column{}, as in the first record), "
                                    "found {}",
                                    columns, columns - 1, columns == 2 ? "" : "s", r.fields.size()));
    auto label = parse_integer(trim(r.fields[0]));
    if (!label) throw_input_error(where, fmt::format("label '{}' is not an integer", r.fields[0]));
    if (fixed && (*label < 1 || *label > num_classes))
      throw_input_error(where, fmt::format("label {} is outside 1..{} (AG News labels are 1-based; {} class names "
                                           "given)",
                                           *label, num_classes, num_classes));
    if (*label < 1) throw_input_error(where, fmt::format("label {} is below 1 (AG News labels are 1-based)", *label));
    if (*label > kMaxClasses)
      throw_input_error(where, fmt::format("label {} is too large (at most {} classes)", *label, kMaxClasses));
    max_label = std::max(max_label, *label);
    std::string joined;
    for (size_t c = 1; c < r.fields.size(); ++c) {
      std::string_view part = trim(r.fields[c]);
      if (part.empty()) continue;
      if (!joined.empty()) joined += ' ';
      joined += part;
    }
    if (joined.empty())
      throw_input_error(where, columns == 3 ? std::string("empty text (title and description are both empty)")
                                            : fmt::format("empty text (all {} text columns are empty)", columns - 1));
    dataset.examples.push_back({std::move(joined), static_cast<int32_t>(*label - 1), where});
  });
  if (fixed) {
    dataset.class_names = options.class_names;
  } else {
    for (int64_t k = 1; k <= max_label; ++k) dataset.class_names.push_back(std::to_string(k));
  }
  return dataset;
}

}  // namespace tandem::data
