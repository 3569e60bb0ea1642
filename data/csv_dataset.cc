#include "data/csv_dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/check.h"
#include "data/csv.h"
#include "data/labels.h"
#include "data/text_file.h"

namespace tandem::data {

namespace {

// The 0-based index of column `name` in a record of `count` columns (`header` empty: no header line).
size_t resolve_column(const std::string& name, const std::vector<std::string>& header, size_t count,
                      const std::string& where, const char* role) {
  if (!header.empty()) {
    auto it = std::find_if(header.begin(), header.end(), [&](const std::string& h) { return trim(h) == name; });
    if (it != header.end()) return static_cast<size_t>(it - header.begin());
  }
  auto index = parse_integer(name);
  if (!index) {
    if (header.empty())
      throw_input_error(where, fmt::format("{} column '{}' is a name, but the file has no header (set header: true, "
                                           "or give a 0-based index)",
                                           role, name));
    throw_input_error(
        where, fmt::format("no {} column '{}' in the header (columns: {})", role, name, fmt::join(header, ", ")));
  }
  if (*index < 0 || static_cast<size_t>(*index) >= count)
    throw_input_error(where, fmt::format("{} column {} is outside the {} columns of the file", role, *index, count));
  return static_cast<size_t>(*index);
}

}  // namespace

Dataset read_csv_dataset(const std::filesystem::path& path, const CsvDatasetOptions& options) {
  TANDEM_CHECK(!options.text_columns.empty(), "CSV: at least one text column is needed");
  const std::string text = read_text_file(path);
  LabelResolver labels(options.class_names);
  Dataset dataset;
  size_t columns = 0, label_index = 0;
  std::vector<size_t> text_indices;
  for_each_csv_record(
      text, path,
      [&](const CsvRecord& r) {
        const std::string where = location(path, r.line);
        if (columns == 0) {  // the header, or the first record
          columns = r.fields.size();
          const std::vector<std::string> header = options.header ? r.fields : std::vector<std::string>{};
          label_index = resolve_column(options.label_column, header, columns, where, "label");
          for (const auto& name : options.text_columns) {
            const size_t i = resolve_column(name, header, columns, where, "text");
            if (i == label_index) throw_input_error(where, fmt::format("text column '{}' is the label column", name));
            text_indices.push_back(i);
          }
          if (options.header) return;
        }
        if (r.fields.size() != columns)
          throw_input_error(where, fmt::format("expected {} columns (as in the {}), found {}", columns,
                                               options.header ? "header" : "first record", r.fields.size()));
        std::string joined;
        for (size_t i : text_indices) {
          std::string_view part = trim(r.fields[i]);
          if (part.empty()) continue;
          if (!joined.empty()) joined += ' ';
          joined += part;
        }
        if (joined.empty()) throw_input_error(where, "empty text (every text column is empty)");
        const int32_t label = labels.from_text(r.fields[label_index], where);
        dataset.examples.push_back({std::move(joined), label, where});
      },
      options.delimiter);
  labels.finish(dataset);
  return dataset;
}

}  // namespace tandem::data
