// A byte-pair-encoding model with the semantics of Hugging Face `tokenizers`'
// models.BPE (no dropout, no continuing-subword prefix or end-of-word suffix,
// no byte fallback, unknown characters not fused): a word is split into
// characters, a character outside the vocabulary becomes the unknown token,
// then merges are applied lowest rank first (leftmost first among equal ranks)
// until none applies.
//
// Training (train_bpe) ports tokenizers' BpeTrainer step by step, quirks
// included, so the same word counts give the same vocabulary and merges: the
// special tokens come first, then every character of the words in code point
// order, then one token per merge; a merge takes the pair with the highest
// count (ties: the smaller pair of ids), stops at vocab_size entries or when
// the best count falls below min_frequency.
//
// Immutable once built; encode_word may be called from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tandem::data {

struct BpeTrainerOptions {
  int64_t vocab_size = 8000;  // entries in all, special tokens included
  int64_t min_frequency = 2;  // a pair seen fewer times (weighted by word counts) is not merged
  std::vector<std::string> special_tokens = {"[PAD]", "[UNK]", "[CLS]"};  // ids 0, 1, ...
  std::string unk_token = "[UNK]";
};

class BpeModel {
 public:
  // `merges` in rank order; each pair's concatenation must be in the
  // vocabulary. A pair listed twice keeps its later rank (as tokenizers does).
  // Throws tandem::Error naming the merge at fault.
  BpeModel(std::vector<std::string> vocab, std::vector<std::pair<std::string, std::string>> merges,
           std::string unk_token);

  const std::vector<std::string>& vocab() const { return vocab_; }
  // The merges by rank, each pair once.
  const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }
  const std::string& unk_token() const { return unk_token_; }
  int32_t unk_id() const { return unk_id_; }
  // -1 when absent.
  int32_t find(std::string_view token) const;

  // Appends the ids of one pre-token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::pair<std::string, std::string>> merges_;
  std::unordered_map<uint64_t, Merge> merge_of_;
  std::string unk_token_;
  int32_t unk_id_ = -1;
};

// Trains on words with their counts (the pre-tokens of the training texts).
BpeModel train_bpe(const std::map<std::string, int64_t>& word_counts, const BpeTrainerOptions& options);

}  // namespace tandem::data
