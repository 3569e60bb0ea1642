// Hashed character n-grams: the feature set of fastText's -minn/-maxn and of
// scikit-learn's TfidfVectorizer(analyzer="char" | "char_wb"), as token ids for
// a bag-of-n-grams classifier (tokenizer type "char_ngrams", data/tokenizer.h).
//
// Analysis follows scikit-learn (sklearn/feature_extraction/text.py):
//   - lowercase (when on) as Python's str.lower(): per-character Unicode lowercasing
//     (hf::lowercase_into) and capital sigma ending a word made final sigma;
//   - every run of two or more white-space characters becomes one space (its
//     _white_spaces = \s\s+; a single newline stays as it is), white space being
//     Python's str.isspace() set;
//   - analyzer "char": every code-point n-gram of the whole text, min_n <= n <= max_n,
//     n first, then position;
//   - analyzer "char_wb": per white-space-separated word, padded with one space on
//     each side, its n-grams n first; a padded word shorter than n is one n-gram once.
//   - word_ngrams 1 or 2 adds the words (the word tokenizer's tokens) and, for 2,
//     adjacent word pairs, each key being U+0001 then the words joined by a space,
//     so that word and character features hash apart.
// An n-gram's id is 3 + FNV-1a-32(its UTF-8 bytes) mod buckets: ids 0..2 stay
// [PAD], [UNK], [CLS], so the vocabulary has 3 + buckets entries. FNV-1a-32 is
// the standard one (offset basis 2166136261, prime 16777619, bytes unsigned);
// fastText uses the same function but sign-extends bytes >= 0x80.
//
// distinct (default): each id at most once per text, in first-occurrence order
// (binary term frequency: a long text does not drown its rare n-grams in repeats).
// term_counts (needs distinct): each id's count in the text goes with it, capped
// at 255, and the tokenizer puts it in the id's mask entry (which every consumer
// reads as "a real token" when nonzero): the term frequency of the TF-IDF
// pooling (kernels/tfidf_weights.h). Counts are of hashed ids, so n-grams
// sharing a bucket add up, as in scikit-learn's HashingVectorizer.
// Truncation: when a text has more ids than fit, they are subsampled evenly over
// the whole list (ids at floor(i * total / limit)), so a long text keeps features
// from its whole length and every n rather than only its beginning.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::data {

struct CharNgramOptions {
  std::string analyzer = "char_wb";  // char | char_wb
  int64_t min_n = 2;
  int64_t max_n = 5;
  int64_t buckets = int64_t{1} << 18;
  int64_t word_ngrams = 0;  // 0: none, 1: words, 2: words and word pairs
  bool lowercase = true;
  bool distinct = true;
  bool term_counts = false;  // with distinct: each id's count (at most 255) comes with it
};

// Throws Error naming the key ("tokenizer.min_n", ...) of the first bad value.
void validate(const CharNgramOptions& options);

uint32_t fnv1a32(std::string_view bytes);

// The features of `text` as strings, in scikit-learn's order (char n-grams, then word
// n-grams), repeats kept: what is hashed.
std::vector<std::string> ngram_features(std::string_view text, const CharNgramOptions& options);

// The ids of ngram_features (distinct applied), without the special tokens. With `counts`,
// counts[i] is how often ids[i] occurs among the features, capped at 255 (1 for each id when
// not distinct).
std::vector<int32_t> ngram_ids(std::string_view text, const CharNgramOptions& options,
                               std::vector<uint8_t>* counts = nullptr);

// Appends at most `limit - out.size()` ids of `text` to `out`, subsampled evenly when there are more;
// with `counts`, appends each appended id's count to it as well.
void append_ngram_ids(std::string_view text, const CharNgramOptions& options, std::vector<int32_t>& out, size_t limit,
                      std::vector<uint8_t>* counts = nullptr);

// The tokenizer file (char_ngrams.json): {"type": "char_ngrams", "version": 1, "analyzer", "min_n",
// "max_n", "buckets", "word_ngrams", "lowercase", "distinct", "prepend_cls", "hash": "fnv1a32", "term_counts"}
// ("term_counts" may be absent, meaning false: files written before it existed).
std::string to_char_ngrams_json(const CharNgramOptions& options, bool prepend_cls);
// True when `text` is a JSON object whose "type" is "char_ngrams" (and not a Hugging Face tokenizer.json).
bool is_char_ngrams_json(std::string_view text);
// `path` is used in messages only; problems name it and the key.
CharNgramOptions parse_char_ngrams_json(std::string_view text, const std::filesystem::path& path, bool* prepend_cls);

}  // namespace tandem::data
