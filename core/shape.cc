#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace tandem
