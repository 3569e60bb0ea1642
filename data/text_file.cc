#include "data/text_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "data/utf8.h"

namespace tandem::data {

std::string location(const std::filesystem::path& path, int64_t line) {
  return fmt::format("{}:{}", path.string(), line);
}

void throw_input_error(const std::string& where, const std::string& what) {
  throw Error(fmt::format("{}: {}", where, what));
}

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw_input_error(path.string(), "no such file");
  if (std::filesystem::is_directory(status)) throw_input_error(path.string(), "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path.string(), fmt::format("cannot open: {}", std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw_input_error(path.string(), "read error");
  std::string text = std::move(buffer).str();
  const size_t bom = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  text.erase(0, bom);

  if (auto bad = find_invalid_utf8(text)) {
    // Report the line and column of the bad byte: count newlines before it.
    size_t line_start = text.rfind('\n', *bad == 0 ? 0 : *bad - 1);
    line_start = (line_start == std::string::npos || *bad == 0) ? 0 : line_start + 1;
    int64_t line =
        1 + static_cast<int64_t>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(*bad), '\n'));
    throw_input_error(location(path, line),
                      fmt::format("invalid UTF-8 at byte offset {} (column {}, byte 0x{:02X})", *bad + bom,
                                  *bad - line_start + 1, static_cast<unsigned char>(text[*bad])));
  }
  return text;
}

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace tandem::data
