#include "data/tsv.h"

#include <fmt/format.h>

#include "core/check.h"
#include "data/labels.h"
#include "data/text_file.h"

namespace tandem::data {

Dataset read_tsv(const std::filesystem::path& path, const TsvOptions& options) {
  TANDEM_CHECK(options.num_columns >= 2, "TSV: num_columns must be at least 2, got {}", options.num_columns);
  TANDEM_CHECK(options.label_column >= 0 && options.label_column < options.num_columns && options.text_column >= 0 &&
                   options.text_column < options.num_columns && options.label_column != options.text_column,
               "TSV: label_column {} and text_column {} must be distinct columns in [0, {})", options.label_column,
               options.text_column, options.num_columns);
  const std::string text = read_text_file(path);
  LabelResolver labels(options.class_names);
  Dataset dataset;
  std::vector<std::string_view> columns;
  for_each_line(text, [&](int64_t number, std::string_view line) {
    if (options.header && number == 1) return;
    if (trim(line).empty()) return;
    const std::string where = location(path, number);
    columns.clear();
    for (size_t start = 0;;) {
      size_t tab = line.find('\t', start);
      columns.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (static_cast<int64_t>(columns.size()) != options.num_columns)
      throw_input_error(
          where, fmt::format("expected {} tab-separated columns, found {}", options.num_columns, columns.size()));
    std::string_view body = trim(columns[static_cast<size_t>(options.text_column)]);
    if (body.empty()) throw_input_error(where, fmt::format("empty text in column {}", options.text_column));
    int32_t label = labels.from_text(columns[static_cast<size_t>(options.label_column)], where);
    dataset.examples.push_back({std::string(body), label, where});
  });
  labels.finish(dataset);
  return dataset;
}

}  // namespace tandem::data
