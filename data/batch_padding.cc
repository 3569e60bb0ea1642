#include "data/batch_padding.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace tandem::data {

Padding parse_padding(const std::string& name, const std::string& key) {
  if (name == "max_length") return Padding::MaxLength;
  if (name == "longest") return Padding::Longest;
  TANDEM_FAIL("{} must be max_length or longest, got '{}'", key, name);
}

int64_t longest_padded_length(const uint8_t* mask, int64_t rows, int64_t seq, int64_t multiple) {
  TANDEM_CHECK(seq >= 1 && rows >= 0 && multiple >= 1,
               "longest_padded_length: needs seq >= 1, rows >= 0 and multiple >= 1 (got {}, {}, {})", seq, rows,
               multiple);
  int64_t longest = 1;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = mask + r * seq;
    // Only positions past the longest so far can lengthen it.
    for (int64_t j = seq - 1; j >= longest; --j) {
      if (row[j] != 0) {
        longest = j + 1;
        break;
      }
    }
    if (longest == seq) break;
  }
  const int64_t rounded = (longest + multiple - 1) / multiple * multiple;
  return std::min(rounded, seq);
}

void shorten_rows(void* data, int64_t rows, int64_t seq, int64_t length, size_t elem_bytes) {
  TANDEM_CHECK(length >= 0 && length <= seq, "shorten_rows: length {} outside [0, {}]", length, seq);
  if (length == seq) return;
  auto* bytes = static_cast<char*>(data);
  const size_t row = static_cast<size_t>(length) * elem_bytes;
  // Row 0 stays where it is; row i's destination ends before its source starts or overlaps it
  // (memmove), and lies wholly before row i + 1's source.
  for (int64_t i = 1; i < rows; ++i)
    std::memmove(bytes + static_cast<size_t>(i) * row, bytes + static_cast<size_t>(i * seq) * elem_bytes, row);
}

int64_t cut_to_longest(void* ids, size_t id_bytes, uint8_t* mask, int64_t rows, int64_t seq, int64_t multiple) {
  const int64_t length = longest_padded_length(mask, rows, seq, multiple);
  shorten_rows(ids, rows, seq, length, id_bytes);
  shorten_rows(mask, rows, seq, length, 1);
  return length;
}

double mean_longest_row(const std::vector<int64_t>& order, const std::vector<int64_t>& lengths, int64_t batch) {
  TANDEM_CHECK(batch >= 1, "mean_longest_row: the batch must hold at least 1 row, got {}", batch);
  if (order.empty()) return 0;
  double positions = 0;
  for (size_t b = 0; b < order.size(); b += static_cast<size_t>(batch)) {
    const size_t end = std::min(order.size(), b + static_cast<size_t>(batch));
    int64_t longest = 0;
    for (size_t i = b; i < end; ++i) {
      const int64_t k = order[i];
      TANDEM_CHECK(k >= 0 && k < static_cast<int64_t>(lengths.size()), "mean_longest_row: index {} outside the {} lengths",
                   k, lengths.size());
      longest = std::max(longest, lengths[static_cast<size_t>(k)]);
    }
    positions += static_cast<double>(longest) * static_cast<double>(end - b);
  }
  return positions / static_cast<double>(order.size());
}

}  // namespace tandem::data
