// RFC 4180 CSV parsing with line numbers for messages.
//
// Records end at LF or CRLF; fields are separated by the delimiter. A field
// that starts with a double quote runs to the matching closing quote and may
// hold delimiters, newlines and "" (one literal quote). Strict where RFC 4180
// is: a quote inside an unquoted field, anything but a delimiter or the end of
// the record after a closing quote, and an unterminated quoted field are
// errors naming the file and line. Completely empty lines are skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::data {

struct CsvRecord {
  std::vector<std::string> fields;
  int64_t line = 0;  // the line the record starts on (1-based)
};

// Calls on_record for each record of `text`, which was read from `path` (used in messages only).
void for_each_csv_record(std::string_view text, const std::filesystem::path& path,
                         const std::function<void(const CsvRecord&)>& on_record, char delimiter = ',');

}  // namespace tandem::data
