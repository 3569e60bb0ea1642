// Tensor shapes: a small vector of non-negative extents, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);  // 1 for a 0-dimensional shape
std::string shape_str(const Shape& shape);  // "[2, 3]"

}  // namespace tandem
