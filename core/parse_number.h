// Numbers spelled by a whole string: what std::stoll and std::stod read
// (leading white space, a sign, decimal digits; for doubles also exponents,
// "inf" and "nan"), but only when nothing follows the number. std::stod alone
// reads "10x" as 10 and throws exceptions whose message is just "stod"; these
// return nullopt instead, so that the caller's error can name the file, line,
// key or option the text came from. Out-of-range values are nullopt too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem {

std::optional<int64_t> parse_int64(const std::string& text);
std::optional<double> parse_double(const std::string& text);

}  // namespace tandem
