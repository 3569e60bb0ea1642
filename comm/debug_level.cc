#include "comm/debug_level.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/check.h"

namespace tandem::comm {

DebugLevel parse_debug_level(std::string_view value, std::string_view variable) {
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  if (v.empty() || v == "OFF") return DebugLevel::Off;
  if (v == "INFO") return DebugLevel::Info;
  if (v == "DETAIL") return DebugLevel::Detail;
  TANDEM_FAIL("{}='{}' is not a debug level (OFF, INFO, DETAIL)", variable, value);
}

DebugLevel distributed_debug_level() {
  for (const char* name : {"TANDEM_DISTRIBUTED_DEBUG", "TORCH_DISTRIBUTED_DEBUG"}) {
    if (const char* v = std::getenv(name)) return parse_debug_level(v, name);
  }
  return DebugLevel::Off;
}

}  // namespace tandem::comm
