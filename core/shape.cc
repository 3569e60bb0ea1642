#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"

namespace tandem {

int64_t shape_numel(const Shape& shape) {
  // Checked: a wrapped count would allocate a small buffer that the kernels then overrun.
  int64_t n = 1;
  for (int64_t d : shape)
    TANDEM_CHECK(!__builtin_mul_overflow(n, d, &n), "shape {} has more elements than an int64 can count",
                 shape_str(shape));
  return n;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace tandem
