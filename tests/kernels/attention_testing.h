// Inputs shared by the attention tests: padding masks from sequence lengths.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tandem::testing {

// [B, S] u8 key-padding mask: row b has lengths[b] real tokens (1) followed by padding (0).
inline Tensor padding_mask(const std::vector<int64_t>& lengths, int64_t seq, Device device = Device::cpu()) {
  std::vector<int64_t> values;
  for (int64_t len : lengths)
    for (int64_t j = 0; j < seq; ++j) values.push_back(j < len ? 1 : 0);
  return Tensor::from_vector(values, {static_cast<int64_t>(lengths.size()), seq}, DType::U8, device);
}

}  // namespace tandem::testing
