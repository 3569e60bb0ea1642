#include "data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>

#include "core/atomic_file.h"
#include "core/check.h"
#include "data/bpe.h"
#include "data/hf_pretokenizer.h"
#include "data/text_file.h"
#include "data/tokenizer_json.h"
#include "data/utf8.h"

namespace tandem::data {

namespace {

enum class CharClass : unsigned char { Space, Punct, Word, Ignore };

constexpr bool is_ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

CharClass classify(char32_t c) {
  if (c < 0x80) {
    if (c <= 0x20 || c == 0x7F) return CharClass::Space;
    return is_ascii_punct(c) ? CharClass::Punct : CharClass::Word;
  }
  if (c == kInvalidCodePoint) return CharClass::Word;
  if (c <= 0x9F || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200B) || c == 0x2028 || c == 0x2029 ||
      c == 0x202F || c == 0x205F || c == 0x3000)
    return CharClass::Space;
  if (c == 0xAD || c == 0xFEFF) return CharClass::Ignore;  // soft hyphen, zero-width no-break space
  if ((c >= 0xA1 && c <= 0xBF && c != 0xAA && c != 0xB5 && c != 0xBA) || c == 0xD7 || c == 0xF7 ||
      (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) || (c >= 0x3001 && c <= 0x3003) ||
      (c >= 0x3008 && c <= 0x3011))
    return CharClass::Punct;
  return CharClass::Word;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c >= 0x100 && c <= 0x17F) {
    // Latin Extended-A pairs: even = capital in 0100..0137 and 014A..0177, odd = capital in 0139..0148 and 0179..017E.
    if ((c <= 0x137 || (c >= 0x14A && c <= 0x177)) && c % 2 == 0) return c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && c % 2 == 1) return c + 1;
    if (c == 0x178) return 0xFF;  // Ÿ
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

// Walks `text` token by token into a reused buffer: no allocation per token in steady state.
class TokenCursor {
 public:
  TokenCursor(std::string_view text, bool lowercase) : text_(text), lowercase_(lowercase) {}

  bool next(std::string& token) {
    token.clear();
    while (pos_ < text_.size()) {
      const auto b = static_cast<unsigned char>(text_[pos_]);
      size_t len = 1;
      char32_t c = b < 0x80 ? b : decode_utf8(text_, pos_, &len);
      switch (classify(c)) {
        case CharClass::Space:
          pos_ += len;
          if (!token.empty()) return true;
          break;
        case CharClass::Ignore:
          pos_ += len;
          break;
        case CharClass::Punct:
          if (!token.empty()) return true;  // the punctuation starts the next token
          token.append(text_.substr(pos_, len));
          pos_ += len;
          return true;
        case CharClass::Word:
          if (c == kInvalidCodePoint) {
            token.push_back(text_[pos_]);
          } else if (!lowercase_) {
            token.append(text_.substr(pos_, len));
          } else if (c < 0x80) {
            token.push_back(static_cast<char>(to_lower(c)));
          } else {
            append_utf8(token, to_lower(c));
          }
          pos_ += len;
          break;
      }
    }
    return !token.empty();
  }

 private:
  std::string_view text_;
  bool lowercase_;
  size_t pos_ = 0;
};

constexpr std::string_view kSpecial[] = {"[PAD]", "[UNK]", "[CLS]"};
constexpr std::string_view kMagic = "tandem-vocab";

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The vocabulary of the texts that `visit` passes to its callback (see the header for the rules).
template <class VisitTexts>
std::vector<std::string> build_vocab(VisitTexts visit, const TokenizerOptions& options) {
  TANDEM_CHECK(options.min_freq >= 1, "tokenizer: min_freq must be at least 1, got {}", options.min_freq);
  TANDEM_CHECK(options.max_size == 0 || options.max_size >= 3,
               "tokenizer: max_size must be 0 (no limit) or at least 3 (the special tokens), got {}", options.max_size);
  std::unordered_map<std::string, int64_t, TransparentHash, std::equal_to<>> counts;
  std::string token;
  visit([&](std::string_view text) {
    TokenCursor cursor(text, options.lowercase);
    while (cursor.next(token)) {
      auto it = counts.find(std::string_view(token));
      if (it == counts.end()) it = counts.emplace(token, 0).first;
      ++it->second;
    }
  });
  std::vector<std::pair<int64_t, std::string_view>> ranked;
  for (const auto& [t, n] : counts)
    if (n >= options.min_freq) ranked.emplace_back(n, t);
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  size_t keep = ranked.size();
  if (options.max_size > 0) keep = std::min(keep, static_cast<size_t>(options.max_size) - 3);
  std::vector<std::string> vocab(std::begin(kSpecial), std::end(kSpecial));
  for (size_t i = 0; i < keep; ++i) vocab.emplace_back(ranked[i].second);
  return vocab;
}

}  // namespace

void for_each_token(std::string_view text, const std::function<void(std::string_view)>& on_token, bool lowercase) {
  TokenCursor cursor(text, lowercase);
  std::string token;
  while (cursor.next(token)) on_token(token);
}

std::vector<std::string> basic_tokenize(std::string_view text, bool lowercase) {
  std::vector<std::string> out;
  for_each_token(
      text, [&](std::string_view t) { out.emplace_back(t); }, lowercase);
  return out;
}

Tokenizer::Tokenizer(std::vector<std::string> vocab, bool prepend_cls, bool lowercase)
    : tokens_(std::move(vocab)), prepend_cls_(prepend_cls), lowercase_(lowercase) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.emplace(tokens_[i], static_cast<int32_t>(i));
}

Tokenizer::Tokenizer(const HfBpeTokenizer& bpe) : Tokenizer(bpe.model->vocab(), bpe.prepend_cls, bpe.lowercase) {
  bpe_ = bpe.model;
}

Tokenizer::Tokenizer(const CharNgramOptions& ngrams, bool prepend_cls)
    : Tokenizer(std::vector<std::string>(std::begin(kSpecial), std::end(kSpecial)), prepend_cls, ngrams.lowercase) {
  validate(ngrams);
  ngrams_ = ngrams;
}

Tokenizer Tokenizer::build_bpe(const std::function<void(const std::function<void(std::string_view)>&)>& visit_texts,
                               const TokenizerOptions& options) {
  // Word counts as tokenizers' trainer collects them: normalize, pre-tokenize, count.
  std::unordered_map<std::string, int64_t, TransparentHash, std::equal_to<>> counts;
  std::string normalized;
  visit_texts([&](std::string_view text) {
    std::string_view norm = text;
    if (options.lowercase) {
      normalized.clear();
      hf::lowercase_into(text, normalized);
      norm = normalized;
    }
    hf::for_each_pretoken(norm, [&](std::string_view word) {
      auto it = counts.find(word);
      if (it == counts.end()) it = counts.emplace(std::string(word), 0).first;
      ++it->second;
    });
  });
  BpeTrainerOptions trainer;
  trainer.vocab_size = options.vocab_size;
  trainer.min_frequency = options.min_frequency;
  auto model = std::make_shared<const BpeModel>(
      train_bpe(std::map<std::string, int64_t>(counts.begin(), counts.end()), trainer));
  return Tokenizer(HfBpeTokenizer{model, options.lowercase, options.prepend_cls});
}

namespace {

CharNgramOptions char_ngram_options(const TokenizerOptions& options) {
  CharNgramOptions o = options.char_ngrams;
  o.lowercase = options.lowercase;
  return o;
}

}  // namespace

Tokenizer Tokenizer::build(const std::vector<std::string>& texts, const TokenizerOptions& options) {
  if (options.type == "char_ngrams") return Tokenizer(char_ngram_options(options), options.prepend_cls);
  if (options.type == "bpe")
    return build_bpe(
        [&](const auto& f) {
          for (const auto& t : texts) f(t);
        },
        options);
  TANDEM_CHECK(options.type == "word", "tokenizer: type must be 'word', 'bpe' or 'char_ngrams', got '{}'",
               options.type);
  return Tokenizer(build_vocab(
                       [&](auto&& f) {
                         for (const auto& t : texts) f(t);
                       },
                       options),
                   options.prepend_cls, options.lowercase);
}

Tokenizer Tokenizer::build(const Dataset& train, const TokenizerOptions& options) {
  if (options.type == "char_ngrams") return Tokenizer(char_ngram_options(options), options.prepend_cls);
  if (options.type == "bpe")
    return build_bpe(
        [&](const auto& f) {
          for (const auto& e : train.examples) f(e.text);
        },
        options);
  TANDEM_CHECK(options.type == "word", "tokenizer: type must be 'word', 'bpe' or 'char_ngrams', got '{}'",
               options.type);
  return Tokenizer(build_vocab(
                       [&](auto&& f) {
                         for (const auto& e : train.examples) f(e.text);
                       },
                       options),
                   options.prepend_cls, options.lowercase);
}

int32_t Tokenizer::id(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? kUnk : it->second;
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(tokens_.size()) + (ngrams_ ? ngrams_->buckets : 0);
}

std::string Tokenizer::token(int32_t id) const {
  TANDEM_CHECK(id >= 0 && id < vocab_size(), "token id {} outside the vocabulary [0, {})", id, vocab_size());
  if (static_cast<size_t>(id) >= tokens_.size()) return fmt::format("#{}", id - static_cast<int32_t>(tokens_.size()));
  return tokens_[static_cast<size_t>(id)];
}

void Tokenizer::append_ids(std::string_view text, std::vector<int32_t>& out, size_t limit,
                           std::vector<uint8_t>* counts) const {
  if (ngrams_) {
    append_ngram_ids(text, *ngrams_, out, limit, counts);
    return;
  }
  if (!bpe_) {
    TokenCursor cursor(text, lowercase_);
    std::string token;
    while (out.size() < limit && cursor.next(token)) out.push_back(id(token));
    return;
  }
  // As tokenizers does: the special tokens are found in the raw text first; the pieces
  // between them are normalized, pre-tokenized and encoded word by word.
  std::string normalized;
  auto encode_piece = [&](std::string_view piece) {
    std::string_view norm = piece;
    if (lowercase_) {
      normalized.clear();
      hf::lowercase_into(piece, normalized);
      norm = normalized;
    }
    hf::for_each_pretoken(norm, [&](std::string_view word) {
      if (out.size() < limit) bpe_->encode_word(word, out);
    });
  };
  size_t start = 0;
  while (start < text.size() && out.size() < limit) {
    size_t found = std::string_view::npos;
    int32_t special = -1;
    for (size_t p = text.find('[', start); p != std::string_view::npos && special < 0; p = text.find('[', p + 1))
      for (int32_t k = 0; k < static_cast<int32_t>(std::size(kSpecial)) && special < 0; ++k)
        if (text.substr(p, kSpecial[k].size()) == kSpecial[k]) {
          special = k;
          found = p;
        }
    if (special < 0) {
      encode_piece(text.substr(start));
      break;
    }
    encode_piece(text.substr(start, found - start));
    if (out.size() < limit) out.push_back(special);
    start = found + kSpecial[special].size();
  }
  if (out.size() > limit) out.resize(limit);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  if (prepend_cls_) out.push_back(kCls);
  append_ids(text, out, std::numeric_limits<size_t>::max());
  return out;
}

int64_t Tokenizer::encode_into(std::string_view text, int64_t max_seq_len, DType ids_dtype, void* ids,
                               uint8_t* mask) const {
  TANDEM_CHECK(max_seq_len >= 1, "max_seq_len must be at least 1, got {}", max_seq_len);
  TANDEM_CHECK(ids_dtype == DType::I32 || ids_dtype == DType::I64, "token ids must be i32 or i64, not {}",
               dtype_name(ids_dtype));
  auto put = [&](int64_t i, int32_t v) {
    if (ids_dtype == DType::I32) {
      static_cast<int32_t*>(ids)[i] = v;
    } else {
      static_cast<int64_t*>(ids)[i] = v;
    }
  };
  std::vector<int32_t> row;
  row.reserve(static_cast<size_t>(max_seq_len));
  if (prepend_cls_) row.push_back(kCls);
  const bool counted = ngrams_ && ngrams_->term_counts;
  std::vector<uint8_t> counts(row.size(), uint8_t{1});  // [CLS] once
  append_ids(text, row, static_cast<size_t>(max_seq_len), counted ? &counts : nullptr);
  const auto n = static_cast<int64_t>(row.size());
  for (int64_t i = 0; i < n; ++i) put(i, row[static_cast<size_t>(i)]);
  for (int64_t i = n; i < max_seq_len; ++i) put(i, kPad);
  if (counted)
    std::copy(counts.begin(), counts.end(), mask);
  else
    std::fill(mask, mask + n, uint8_t{1});
  std::fill(mask + n, mask + max_seq_len, uint8_t{0});
  return n;
}

Encoding Tokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_seq_len, DType ids_dtype) const {
  const auto b = static_cast<int64_t>(texts.size());
  Encoding out{Tensor::empty({b, max_seq_len}, ids_dtype), Tensor::empty({b, max_seq_len}, DType::U8)};
  auto* ids = static_cast<char*>(out.ids.data_ptr());
  auto* mask = out.mask.data<uint8_t>();
  const size_t row_bytes = static_cast<size_t>(max_seq_len) * dtype_size(ids_dtype);
  for (int64_t i = 0; i < b; ++i)
    encode_into(texts[static_cast<size_t>(i)], max_seq_len, ids_dtype, ids + static_cast<size_t>(i) * row_bytes,
                mask + i * max_seq_len);
  return out;
}

std::string Tokenizer::file_name() const {
  return ngrams_ ? "char_ngrams.json" : bpe_ ? "tokenizer.json" : "vocab.txt";
}

std::filesystem::path Tokenizer::file_in(const std::filesystem::path& dir) {
  for (const char* name : {"tokenizer.json", "char_ngrams.json"})
    if (std::filesystem::exists(dir / name)) return dir / name;
  return dir / "vocab.txt";
}

void Tokenizer::save(const std::filesystem::path& path) const {
  std::string text;
  if (ngrams_) {
    text = to_char_ngrams_json(*ngrams_, prepend_cls_);
  } else if (bpe_) {
    text = to_tokenizer_json(HfBpeTokenizer{bpe_, lowercase_, prepend_cls_});
  } else {
    text = std::string(kMagic) + " 1 prepend_cls=" + (prepend_cls_ ? "1" : "0") + " lowercase=" + (lowercase_ ? "1" : "0") +
           "\n";
    for (const auto& t : tokens_) text += t + "\n";
  }
  write_file_atomically(path, text);
}

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  if (const size_t first = text.find_first_not_of(" \t\r\n"); first != std::string::npos && text[first] == '{') {
    if (is_char_ngrams_json(text)) {
      bool prepend_cls = true;
      const CharNgramOptions options = parse_char_ngrams_json(text, path, &prepend_cls);
      return Tokenizer(options, prepend_cls);
    }
    return Tokenizer(parse_tokenizer_json(text, path));
  }
  std::vector<std::string> vocab;
  std::unordered_map<std::string, int64_t> first_line;
  bool prepend_cls = true, lowercase = true;
  int64_t last = 0;
  for_each_line(text, [&](int64_t number, std::string_view line) {
    last = number;
    const std::string where = location(path, number);
    if (number == 1) {
      int version = 0, cls = -1, lower = -1;
      std::string header(line);
      char magic[16] = {};
      if (std::sscanf(header.c_str(), "%12s %d prepend_cls=%d lowercase=%d", magic, &version, &cls, &lower) != 4 ||
          kMagic != magic)
        throw_input_error(where, fmt::format("not a Tandem vocabulary: expected '{} 1 prepend_cls=0|1 lowercase=0|1', "
                                             "found '{}'",
                                             kMagic, line));
      if (version != 1)
        throw_input_error(where, fmt::format("unsupported vocabulary version {} (this build reads 1)", version));
      if (cls != 0 && cls != 1) throw_input_error(where, fmt::format("prepend_cls must be 0 or 1, found {}", cls));
      if (lower != 0 && lower != 1) throw_input_error(where, fmt::format("lowercase must be 0 or 1, found {}", lower));
      prepend_cls = cls == 1;
      lowercase = lower == 1;
      return;
    }
    const size_t id = vocab.size();
    if (id < std::size(kSpecial)) {
      if (line != kSpecial[id])
        throw_input_error(where,
                          fmt::format("expected the special token {} (id {}), found '{}'", kSpecial[id], id, line));
    } else {
      if (line.empty()) throw_input_error(where, "empty token");
      // A token the tokenizer cannot produce would never be used: the file was edited or is not ours.
      auto pieces = basic_tokenize(line, lowercase);
      if (pieces.size() != 1 || pieces[0] != line)
        throw_input_error(where, fmt::format("'{}' is not a single normalized token (tokenizes as {} piece(s))", line,
                                             pieces.size()));
    }
    auto [it, inserted] = first_line.emplace(std::string(line), number);
    if (!inserted) throw_input_error(where, fmt::format("duplicate token '{}' (first on line {})", line, it->second));
    vocab.emplace_back(line);
  });
  if (last == 0) throw_input_error(path.string(), "empty vocabulary file");
  if (vocab.size() < std::size(kSpecial))
    throw_input_error(location(path, last), fmt::format("the file ends before the special tokens {}, {}, {}",
                                                        kSpecial[0], kSpecial[1], kSpecial[2]));
  return Tokenizer(std::move(vocab), prepend_cls, lowercase);
}

}  // namespace tandem::data
