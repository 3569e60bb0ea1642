// The tokenizer of a training job, built from the training split: word-level
// (type "word", the default), subword BPE (type "bpe") or hashed character
// n-grams for a bag-of-n-grams model (type "char_ngrams", data/char_ngrams.h:
// nothing is learned from the data, the ids are hashes; saved as char_ngrams.json).
//
// BPE (data/bpe.h, data/hf_pretokenizer.h) is Hugging Face `tokenizers`' models.BPE
// behind a Lowercase normalizer (when lowercase) and the Whitespace pre-tokenizer,
// trained like its BpeTrainer, with [PAD]=0, [UNK]=1, [CLS]=2 as special tokens
// matched in the raw text, and saved as tokenizer.json (data/tokenizer_json.h):
// the ids equal those of `tokenizers` for the same file and text.
//
// Word-level splitting rules (basic_tokenize):
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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "data/char_ngrams.h"
#include "data/dataset.h"

namespace tandem::data {

class BpeModel;
struct HfBpeTokenizer;

// Calls on_token for each token of `text`, in order (views valid only during the call).
void for_each_token(std::string_view text, const std::function<void(std::string_view)>& on_token,
                    bool lowercase = true);
std::vector<std::string> basic_tokenize(std::string_view text, bool lowercase = true);

struct TokenizerOptions {
  std::string type = "word";  // "word", "bpe" or "char_ngrams"
  int64_t min_freq = 1;       // word: rarer training tokens map to [UNK]
  int64_t max_size = 0;       // word: vocabulary entries including the 3 special tokens; 0 = no limit
  int64_t vocab_size = 8000;  // bpe: target vocabulary (special tokens and alphabet included)
  int64_t min_frequency = 2;  // bpe: a pair seen fewer times in the training words is not merged
  bool prepend_cls = true;    // sequences start with [CLS], which the classifier can pool
  bool lowercase = true;
  CharNgramOptions char_ngrams{};  // char_ngrams (its lowercase is taken from `lowercase`)
};

struct Encoding {
  Tensor ids;   // [B, S] I32 or I64
  // [B, S] U8, 1 for real tokens ([CLS] included), 0 for padding; char_ngrams with term_counts:
  // each id's count in the text (at most 255) instead of 1.
  Tensor mask;
};

class Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnk = 1, kCls = 2;

  static Tokenizer build(const std::vector<std::string>& texts, const TokenizerOptions& options = {});
  static Tokenizer build(const Dataset& train, const TokenizerOptions& options = {});

  // Word-level: a text file, a header line "tandem-vocab 1 prepend_cls=<0|1> lowercase=<0|1>",
  // then one token per line, the token on line n having id n - 2. BPE: Hugging Face's
  // tokenizer.json. char_ngrams: char_ngrams.json (data/char_ngrams.h), told apart from
  // tokenizer.json by its "type". Saving writes a temporary file and renames it; loading tells the two
  // apart by content and reports problems naming the file (and line or JSON key).
  void save(const std::filesystem::path& path) const;
  static Tokenizer load(const std::filesystem::path& path);
  // "vocab.txt" (word), "tokenizer.json" (bpe) or "char_ngrams.json": the name it is saved under next to checkpoints.
  std::string file_name() const;
  // The tokenizer file in a checkpoint or output folder: tokenizer.json or char_ngrams.json if
  // present, else vocab.txt.
  static std::filesystem::path file_in(const std::filesystem::path& dir);

  std::string type() const { return ngrams_ ? "char_ngrams" : bpe_ ? "bpe" : "word"; }
  // char_ngrams: the 3 special tokens plus the hash buckets.
  int64_t vocab_size() const;
  bool prepend_cls() const { return prepend_cls_; }
  bool lowercase() const { return lowercase_; }
  int32_t id(std::string_view token) const;  // kUnk when not in the vocabulary (char_ngrams: the special tokens only)
  std::string token(int32_t id) const;       // char_ngrams: "#<bucket>" for a hashed id
  const CharNgramOptions* char_ngrams() const { return ngrams_ ? &*ngrams_ : nullptr; }

  // Every token id of `text` ([CLS] first when prepend_cls), without truncation.
  // (char_ngrams truncates by subsampling the whole text's ids evenly, not by cutting its end.)
  std::vector<int32_t> encode(std::string_view text) const;
  // Fills one row: ids[0..max_seq_len) as `ids_dtype` (I32 or I64) and mask[0..max_seq_len) (as
  // Encoding::mask), truncating after max_seq_len tokens and padding with [PAD]/0. Returns the real
  // tokens written.
  int64_t encode_into(std::string_view text, int64_t max_seq_len, DType ids_dtype, void* ids, uint8_t* mask) const;
  Encoding encode_batch(const std::vector<std::string>& texts, int64_t max_seq_len, DType ids_dtype = DType::I64) const;

 private:
  Tokenizer(std::vector<std::string> vocab, bool prepend_cls, bool lowercase);  // vocab starts with the special tokens
  explicit Tokenizer(const HfBpeTokenizer& bpe);
  Tokenizer(const CharNgramOptions& ngrams, bool prepend_cls);
  static Tokenizer build_bpe(const std::function<void(const std::function<void(std::string_view)>&)>& visit_texts,
                             const TokenizerOptions& options);
  // Appends the ids of `text` without [CLS], stopping once `out` holds at least `limit` ids;
  // char_ngrams with `counts`: each id's count in the text too.
  void append_ids(std::string_view text, std::vector<int32_t>& out, size_t limit,
                  std::vector<uint8_t>* counts = nullptr) const;

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  bool prepend_cls_ = true;
  bool lowercase_ = true;
  std::shared_ptr<const BpeModel> bpe_;  // null: word-level
  std::optional<CharNgramOptions> ngrams_;  // set: hashed n-grams (tokens_ holds the special tokens only)
};

}  // namespace tandem::data
