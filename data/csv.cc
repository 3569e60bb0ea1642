#include "data/csv.h"

#include <fmt/format.h>

#include "data/text_file.h"

namespace tandem::data {

void for_each_csv_record(std::string_view text, const std::filesystem::path& path,
                         const std::function<void(const CsvRecord&)>& on_record, char delimiter) {
  CsvRecord record;
  std::string field;
  int64_t line = 1;
  size_t i = 0;
  const size_t n = text.size();
  auto at_record_end = [&](size_t k) {
    return k >= n || text[k] == '\n' || (text[k] == '\r' && k + 1 < n && text[k + 1] == '\n');
  };
  auto skip_newline = [&](size_t k) {  // k at '\n', "\r\n" or the end; returns the index after it
    if (k >= n) return n;
    ++line;
    return text[k] == '\r' ? k + 2 : k + 1;
  };

  while (i < n) {
    if (at_record_end(i)) {  // an empty line
      i = skip_newline(i);
      continue;
    }
    record.fields.clear();
    record.line = line;
    for (;;) {  // one field per iteration
      field.clear();
      if (i < n && text[i] == '"') {
        const int64_t opened_on = line;
        ++i;
        for (;;) {
          if (i >= n) throw_input_error(location(path, opened_on), "quoted field is never closed (missing '\"')");
          char c = text[i];
          if (c == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\n') ++line;
          field.push_back(c);
          ++i;
        }
        if (!at_record_end(i) && text[i] != delimiter)
          throw_input_error(location(path, line),
                            fmt::format("unexpected '{}' after a closing quote (expected '{}' or the end of the line)",
                                        text[i], delimiter));
      } else {
        while (!at_record_end(i) && text[i] != delimiter) {
          if (text[i] == '"')
            throw_input_error(location(path, line),
                              "'\"' inside an unquoted field (quote the whole field and double the quote)");
          field.push_back(text[i]);
          ++i;
        }
      }
      record.fields.push_back(field);
      if (at_record_end(i)) {
        i = skip_newline(i);
        break;
      }
      ++i;  // the delimiter
    }
    on_record(record);
  }
}

}  // namespace tandem::data
