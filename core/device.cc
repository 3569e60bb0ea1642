#include "core/device.h"

#include <charconv>

#include "core/check.h"

namespace tandem {

std::string Device::str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    auto [p, ec] = std::from_chars(b, e, index);
    if (ec == std::errc() && p == e && b != e && index >= 0) return Device::cuda(index);
  }
  TANDEM_FAIL("invalid device '{}' (expected cpu, cuda or cuda:N)", text);
}

}  // namespace tandem
