// Reading input text files, and the error every reader throws for bad input.
//
// Input errors name the user's file and line, not Tandem's source line: the
// message is "path:line: what is wrong" (or "path: what is wrong" for a whole
// file), so an editor or a grep jumps straight to the bad record.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace tandem::data {

// "path:line"
std::string location(const std::filesystem::path& path, int64_t line);

// Throws tandem::Error("<where>: <what>"); `where` is a path or a location().
[[noreturn]] void throw_input_error(const std::string& where, const std::string& what);

// The whole file as bytes, with a leading UTF-8 byte order mark removed. Throws an
// input error naming the path when it is missing, not a regular file or unreadable,
// and "path:line: invalid UTF-8 at byte offset N (column C)" for bad encoding.
std::string read_text_file(const std::filesystem::path& path);

// Calls f(line_number, line) for each line of `text` (1-based; the line without its
// "\n" or "\r\n"). A final line without a newline counts; an empty text has no lines.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  int64_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    f(++number, line);
    start = end + 1;
  }
}

// `s` without leading and trailing ASCII whitespace.
std::string_view trim(std::string_view s);

}  // namespace tandem::data
