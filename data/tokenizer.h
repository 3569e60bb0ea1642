// Word-level tokenizer with a vocabulary built from the training split.
//
// Splitting rules (basic_tokenize):
//   - lower-case (unless lowercase is off): ASCII, Latin-1, Latin Extended-A,
//     Greek and Cyrillic capitals; other scripts are kept as they are;
//   - whitespace and control characters separate tokens;
//   - punctuation is kept, each character its own token: ASCII punctuation
//     (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), Latin-1 signs (¡ « » ¿ § ° ± × ÷ ...)
//     and General Punctuation (– — ‘ ’ “ ” … ‰ ...). So "Don't!" is
//     don ' t !, which keeps negation and emphasis visible to the model;
//   - everything else (letters, digits, other scripts, bytes of invalid UTF-8)
//     forms words.
// The vocabulary holds [PAD]=0, [UNK]=1, [CLS]=2, then the training tokens seen
// at least min_freq times, most frequent first, ties in byte order, cut at
// max_size entries in all. Special tokens cannot collide with text: "[" and
// "]" always split off.
//
// A Tokenizer is immutable once built or loaded; its const methods may be
// called from several loader threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace tandem::data {

// Calls on_token for each token of `text`, in order (views valid only during the call).
void for_each_token(std::string_view text, const std::function<void(std::string_view)>& on_token,
                    bool lowercase = true);
std::vector<std::string> basic_tokenize(std::string_view text, bool lowercase = true);

struct TokenizerOptions {
  int64_t min_freq = 1;     // rarer training tokens map to [UNK]
  int64_t max_size = 0;     // vocabulary entries including the 3 special tokens; 0 = no limit
  bool prepend_cls = true;  // sequences start with [CLS], which the classifier can pool
  bool lowercase = true;
};

struct Encoding {
  Tensor ids;   // [B, S] I32 or I64
  Tensor mask;  // [B, S] U8, 1 for real tokens ([CLS] included), 0 for padding
};

class Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnk = 1, kCls = 2;

  static Tokenizer build(const std::vector<std::string>& texts, const TokenizerOptions& options = {});
  static Tokenizer build(const Dataset& train, const TokenizerOptions& options = {});

  // The file is text: a header line "tandem-vocab 1 prepend_cls=<0|1> lowercase=<0|1>", then
  // one token per line, the token on line n having id n - 2. Saving writes a temporary file and
  // renames it; loading reports problems as "path:line: what is wrong".
  void save(const std::filesystem::path& path) const;
  static Tokenizer load(const std::filesystem::path& path);

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  bool prepend_cls() const { return prepend_cls_; }
  bool lowercase() const { return lowercase_; }
  int32_t id(std::string_view token) const;  // kUnk when not in the vocabulary
  const std::string& token(int32_t id) const;

  // Every token id of `text` ([CLS] first when prepend_cls), without truncation.
  std::vector<int32_t> encode(std::string_view text) const;
  // Fills one row: ids[0..max_seq_len) as `ids_dtype` (I32 or I64) and mask[0..max_seq_len),
  // truncating after max_seq_len tokens and padding with [PAD]/0. Returns the real tokens written.
  int64_t encode_into(std::string_view text, int64_t max_seq_len, DType ids_dtype, void* ids, uint8_t* mask) const;
  Encoding encode_batch(const std::vector<std::string>& texts, int64_t max_seq_len, DType ids_dtype = DType::I64) const;

 private:
  Tokenizer(std::vector<std::string> vocab, bool prepend_cls, bool lowercase);  // vocab starts with the special tokens

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  bool prepend_cls_ = true;
  bool lowercase_ = true;
};

}  // namespace tandem::data
