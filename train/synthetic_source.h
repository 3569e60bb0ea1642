// Batches with no data files, for the benchmarks (`tandem bench step|ops
// --synthetic`): rows of pseudo-random token ids, each a pure function of the
// example index, [CLS] first, labels index % kSyntheticClasses, the vocabulary
// data.vocab_max_size. Every row full length by default: the worst case for
// memory and the same work every step. With a real fraction F < 1 a row keeps
// its first L tokens real and pads (masks) the rest, L uniform in
// [1, 2 ceil(F S) - 1] capped at S and fixed per example, so the mean is about
// F S: the shape of a text dataset padded to max_seq_len, for what depends on
// the mask (trimmed attention key tiles, kernels/cuda/attention_switches.h).
#pragma once

#include <cstdint>
#include <span>

#include "data/batch_source.h"

namespace tandem::train {

constexpr int64_t kSyntheticClasses = 4;

class SyntheticSource final : public data::BatchSource {
 public:
  // examples >= 1, seq_len >= 1, vocab > 3 (ids 0..2 are the special tokens), real_fraction in (0, 1];
  // Error otherwise.
  SyntheticSource(int64_t examples, int64_t seq_len, int64_t vocab, double real_fraction = 1.0);
  int64_t size() const override { return examples_; }
  int64_t seq_len() const override { return seq_len_; }
  void fill(std::span<const int64_t> indices, const data::BatchBuffers& out) const override;
  // Real tokens of example `index`'s row.
  int64_t length(int64_t index) const override;

 private:
  int64_t examples_, seq_len_, vocab_;
  int64_t longest_;  // the longest row: seq_len_ when every row is full length
  bool full_;
};

}  // namespace tandem::train
