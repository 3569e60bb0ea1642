#include "train/synthetic_source.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "data/tokenizer.h"

namespace tandem::train {

namespace {

uint64_t mix(int64_t i, int64_t j) {  // splitmix64 of (i, j)
  uint64_t z = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(j) + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SyntheticSource::SyntheticSource(int64_t examples, int64_t seq_len, int64_t vocab, double real_fraction)
    : examples_(examples), seq_len_(seq_len), vocab_(vocab), longest_(seq_len), full_(real_fraction >= 1.0) {
  TANDEM_CHECK(examples >= 1 && seq_len >= 1, "synthetic data: need examples >= 1 and seq_len >= 1, got {} and {}",
               examples, seq_len);
  TANDEM_CHECK(vocab > 3, "synthetic data needs data.vocab_max_size > 3, got {}", vocab);
  TANDEM_CHECK(real_fraction > 0 && real_fraction <= 1,
               "synthetic data: the real share of each row must be in (0, 1], got {}", real_fraction);
  if (!full_) {
    const auto mean = static_cast<int64_t>(std::ceil(real_fraction * static_cast<double>(seq_len)));
    longest_ = std::min(seq_len, 2 * mean - 1);
  }
}

int64_t SyntheticSource::length(int64_t index) const {
  return full_ ? seq_len_ : 1 + static_cast<int64_t>(mix(index, -1) % static_cast<uint64_t>(longest_));
}

void SyntheticSource::fill(std::span<const int64_t> indices, const data::BatchBuffers& out) const {
  for (size_t r = 0; r < indices.size(); ++r) {
    const int64_t idx = indices[r], real = length(idx);
    for (int64_t j = 0; j < seq_len_; ++j) {
      const int64_t id = j >= real ? data::Tokenizer::kPad
                         : j == 0  ? data::Tokenizer::kCls
                                   : 3 + static_cast<int64_t>(mix(idx, j) % static_cast<uint64_t>(vocab_ - 3));
      const size_t at = r * static_cast<size_t>(seq_len_) + static_cast<size_t>(j);
      if (out.ids_dtype == DType::I32)
        static_cast<int32_t*>(out.ids)[at] = static_cast<int32_t>(id);
      else
        static_cast<int64_t*>(out.ids)[at] = id;
      out.mask[at] = j < real ? 1 : 0;
    }
    out.labels[r] = idx % kSyntheticClasses;
  }
}

}  // namespace tandem::train
