#include "core/parse_number.h"

#include <exception>

namespace tandem {

std::optional<int64_t> parse_int64(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {  // no digits, or out of range
  }
  return std::nullopt;
}

std::optional<double> parse_double(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace tandem
