#include "data/batch_source.h"

#include "core/check.h"

namespace tandem::data {

TextClassificationSource::TextClassificationSource(std::shared_ptr<const Dataset> dataset,
                                                   std::shared_ptr<const Tokenizer> tokenizer, int64_t max_seq_len)
    : dataset_(std::move(dataset)), tokenizer_(std::move(tokenizer)), max_seq_len_(max_seq_len) {
  TANDEM_CHECK(dataset_ && tokenizer_, "TextClassificationSource needs a dataset and a tokenizer");
  TANDEM_CHECK(max_seq_len >= 1, "max_seq_len must be at least 1, got {}", max_seq_len);
}

void TextClassificationSource::fill(std::span<const int64_t> indices, const BatchBuffers& out) const {
  const size_t row_bytes = static_cast<size_t>(max_seq_len_) * dtype_size(out.ids_dtype);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t index = indices[i];
    TANDEM_CHECK(index >= 0 && index < size(), "example index {} outside the dataset [0, {})", index, size());
    const Example& e = dataset_->examples[static_cast<size_t>(index)];
    tokenizer_->encode_into(e.text, max_seq_len_, out.ids_dtype, static_cast<char*>(out.ids) + i * row_bytes,
                            out.mask + static_cast<int64_t>(i) * max_seq_len_);
    out.labels[i] = e.label;
  }
}

int64_t TextClassificationSource::length(int64_t index) const {
  TANDEM_CHECK(index >= 0 && index < size(), "example index {} outside the dataset [0, {})", index, size());
  std::vector<int32_t> ids(static_cast<size_t>(max_seq_len_));
  std::vector<uint8_t> mask(static_cast<size_t>(max_seq_len_));
  // Real tokens come first in a row, so their count is one past the last.
  return tokenizer_->encode_into(dataset_->examples[static_cast<size_t>(index)].text, max_seq_len_, DType::I32,
                                 ids.data(), mask.data());
}

std::vector<int64_t> lengths_of(const BatchSource& source) {
  std::vector<int64_t> out(static_cast<size_t>(source.size()));
  for (int64_t i = 0; i < source.size(); ++i) out[static_cast<size_t>(i)] = source.length(i);
  return out;
}

}  // namespace tandem::data
