#include "data/char_ngrams.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/check.h"
#include "data/hf_pretokenizer.h"
#include "data/text_file.h"
#include "data/tokenizer.h"
#include "data/utf8.h"

namespace tandem::data {

namespace {

constexpr int32_t kFirstId = 3;  // after [PAD], [UNK], [CLS]

// Python's str.isspace(), which is also what re's \s and str.split() use.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A text as code points: `bytes` holds them, code point k spanning [start[k], start[k + 1]).
struct CodePoints {
  std::string bytes;
  std::vector<size_t> start{0};
  std::vector<bool> space;

  void push(std::string_view piece, bool is_space) {
    bytes.append(piece);
    start.push_back(bytes.size());
    space.push_back(is_space);
  }
  size_t size() const { return space.size(); }
  std::string_view span(size_t from, size_t to) const { return std::string_view(bytes).substr(start[from], start[to] - start[from]); }
};

// A letter for Python's final-sigma rule (its "cased" characters; word characters other
// than digits and '_' stand in for them).
bool is_cased_letter(char32_t c) { return hf::is_word_char(c) && !(c >= '0' && c <= '9') && c != '_'; }

// Python's str.lower(): hf::lowercase_into (Rust's per-character lowercase) plus the one
// context rule Python applies, capital sigma at the end of a word becoming final sigma.
void python_lower_into(std::string_view text, std::string& out) {
  constexpr std::string_view kCapitalSigma = "\xCE\xA3", kFinalSigma = "\xCF\x82";
  if (text.find(kCapitalSigma) == std::string_view::npos) {
    hf::lowercase_into(text, out);
    return;
  }
  std::vector<std::pair<size_t, size_t>> spans;  // code points: byte offset, length
  std::vector<char32_t> cps;
  for (size_t i = 0, len = 1; i < text.size(); i += len) {
    cps.push_back(decode_utf8(text, i, &len));
    spans.emplace_back(i, len);
  }
  for (size_t k = 0; k < cps.size(); ++k) {
    const std::string_view piece = text.substr(spans[k].first, spans[k].second);
    const bool final_sigma = cps[k] == 0x03A3 && k > 0 && is_cased_letter(cps[k - 1]) &&
                             !(k + 1 < cps.size() && is_cased_letter(cps[k + 1]));
    if (final_sigma)
      out.append(kFinalSigma);
    else
      hf::lowercase_into(piece, out);
  }
}

// Lower-cased (when asked), with every run of two or more white-space characters made one space.
CodePoints normalize(std::string_view text, bool lowercase) {
  std::string lowered;
  if (lowercase) {
    python_lower_into(text, lowered);
    text = lowered;
  }
  CodePoints out;
  out.bytes.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = 1;
    const char32_t c = decode_utf8(text, i, &len);  // an invalid byte stays one non-space "character"
    if (!is_py_space(c)) {
      out.push(text.substr(i, len), false);
      i += len;
      continue;
    }
    size_t j = i + len, run = 1;
    for (size_t l = 1; j < text.size() && is_py_space(decode_utf8(text, j, &l)); j += l) ++run;
    out.push(run >= 2 ? std::string_view(" ") : text.substr(i, len), true);
    i = j;
  }
  return out;
}

template <class OnGram>
void for_each_char_ngram(const CodePoints& text, const CharNgramOptions& o, OnGram&& on_gram) {
  const auto min_n = static_cast<size_t>(o.min_n), max_n = static_cast<size_t>(o.max_n);
  if (o.analyzer == "char") {
    for (size_t n = min_n; n <= max_n && n <= text.size(); ++n)
      for (size_t i = 0; i + n <= text.size(); ++i) on_gram(text.span(i, i + n));
    return;
  }
  // char_wb: each word padded with a space on both sides.
  CodePoints word;
  size_t k = 0;
  while (k < text.size()) {
    if (text.space[k]) {
      ++k;
      continue;
    }
    word = CodePoints{};
    word.push(" ", true);
    for (; k < text.size() && !text.space[k]; ++k) word.push(text.span(k, k + 1), false);
    word.push(" ", true);
    const size_t len = word.size();
    for (size_t n = min_n; n <= max_n; ++n) {
      if (n >= len) {  // scikit-learn counts a short padded word once, then moves on
        on_gram(word.span(0, len));
        break;
      }
      for (size_t i = 0; i + n <= len; ++i) on_gram(word.span(i, i + n));
    }
  }
}

template <class OnGram>
void for_each_feature(std::string_view text, const CharNgramOptions& o, OnGram&& on_gram) {
  for_each_char_ngram(normalize(text, o.lowercase), o, on_gram);
  if (o.word_ngrams == 0) return;
  std::string key, previous;
  for_each_token(
      text,
      [&](std::string_view word) {
        key.assign("\x01").append(word);
        on_gram(key);
        if (o.word_ngrams >= 2 && !previous.empty()) {
          key.assign("\x01").append(previous).append(" ").append(word);
          on_gram(key);
        }
        previous.assign(word);
      },
      o.lowercase);
}

int32_t id_of(std::string_view gram, int64_t buckets) {
  return kFirstId + static_cast<int32_t>(fnv1a32(gram) % static_cast<uint64_t>(buckets));
}

}  // namespace

void validate(const CharNgramOptions& o) {
  TANDEM_CHECK(o.analyzer == "char" || o.analyzer == "char_wb",
               "config: tokenizer.analyzer must be 'char' or 'char_wb', got '{}'", o.analyzer);
  TANDEM_CHECK(o.min_n >= 1, "config: tokenizer.min_n must be >= 1, got {}", o.min_n);
  TANDEM_CHECK(o.max_n >= o.min_n, "config: tokenizer.max_n ({}) must be >= tokenizer.min_n ({})", o.max_n, o.min_n);
  TANDEM_CHECK(o.max_n <= 32, "config: tokenizer.max_n must be <= 32, got {}", o.max_n);
  TANDEM_CHECK(o.buckets >= 1 && o.buckets <= (int64_t{1} << 30),
               "config: tokenizer.buckets must be in [1, 2^30], got {}", o.buckets);
  TANDEM_CHECK(o.word_ngrams >= 0 && o.word_ngrams <= 2, "config: tokenizer.word_ngrams must be 0, 1 or 2, got {}",
               o.word_ngrams);
  TANDEM_CHECK(!o.term_counts || o.distinct,
               "config: tokenizer.term_counts needs tokenizer.distinct: true (the counts go with each distinct id)");
}

uint32_t fnv1a32(std::string_view bytes) {
  uint32_t h = 2166136261u;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::vector<std::string> ngram_features(std::string_view text, const CharNgramOptions& options) {
  std::vector<std::string> out;
  for_each_feature(text, options, [&](std::string_view g) { out.emplace_back(g); });
  return out;
}

std::vector<int32_t> ngram_ids(std::string_view text, const CharNgramOptions& options, std::vector<uint8_t>* counts) {
  std::vector<int32_t> ids;
  std::vector<int64_t> occurrences;
  std::unordered_map<int32_t, size_t> index;  // id -> its place in ids
  for_each_feature(text, options, [&](std::string_view g) {
    const int32_t id = id_of(g, options.buckets);
    if (!options.distinct) {
      ids.push_back(id);
      occurrences.push_back(1);
      return;
    }
    auto [it, inserted] = index.emplace(id, ids.size());
    if (inserted) {
      ids.push_back(id);
      occurrences.push_back(1);
    } else {
      ++occurrences[it->second];
    }
  });
  if (counts) {
    counts->clear();
    for (int64_t n : occurrences) counts->push_back(static_cast<uint8_t>(std::min<int64_t>(n, 255)));
  }
  return ids;
}

void append_ngram_ids(std::string_view text, const CharNgramOptions& options, std::vector<int32_t>& out, size_t limit,
                      std::vector<uint8_t>* counts) {
  if (out.size() >= limit) return;
  std::vector<uint8_t> text_counts;
  const std::vector<int32_t> ids = ngram_ids(text, options, counts ? &text_counts : nullptr);
  const size_t room = limit - out.size();
  const size_t taken = std::min(ids.size(), room);
  for (size_t i = 0; i < taken; ++i) {
    const size_t from = ids.size() <= room ? i : i * ids.size() / room;
    out.push_back(ids[from]);
    if (counts) counts->push_back(text_counts[from]);
  }
}

std::string to_char_ngrams_json(const CharNgramOptions& o, bool prepend_cls) {
  nlohmann::ordered_json j;
  j["type"] = "char_ngrams";
  j["version"] = 1;
  j["hash"] = "fnv1a32";
  j["analyzer"] = o.analyzer;
  j["min_n"] = o.min_n;
  j["max_n"] = o.max_n;
  j["buckets"] = o.buckets;
  j["word_ngrams"] = o.word_ngrams;
  j["lowercase"] = o.lowercase;
  j["distinct"] = o.distinct;
  j["prepend_cls"] = prepend_cls;
  j["term_counts"] = o.term_counts;
  return j.dump(1) + "\n";
}

bool is_char_ngrams_json(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() && j.contains("type") && j["type"] == "char_ngrams";
}

CharNgramOptions parse_char_ngrams_json(std::string_view text, const std::filesystem::path& path, bool* prepend_cls) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw_input_error(path.string(), "not a JSON object");
  auto need = [&](const char* key, auto check, const char* what) -> const nlohmann::json& {
    if (!j.contains(key)) throw_input_error(path.string(), fmt::format("missing key '{}'", key));
    const auto& v = j[key];
    if (!check(v)) throw_input_error(path.string(), fmt::format("key '{}' must be {}, found {}", key, what, v.dump()));
    return v;
  };
  auto integer = [](const nlohmann::json& v) { return v.is_number_integer(); };
  auto boolean = [](const nlohmann::json& v) { return v.is_boolean(); };
  auto string = [](const nlohmann::json& v) { return v.is_string(); };
  if (need("type", string, "a string").get<std::string>() != "char_ngrams")
    throw_input_error(path.string(), "key 'type' must be \"char_ngrams\"");
  if (need("version", integer, "an integer").get<int64_t>() != 1)
    throw_input_error(path.string(), fmt::format("unsupported key 'version' {} (this build reads 1)", j["version"].dump()));
  if (need("hash", string, "a string").get<std::string>() != "fnv1a32")
    throw_input_error(path.string(), fmt::format("key 'hash' must be \"fnv1a32\", found {}", j["hash"].dump()));
  CharNgramOptions o;
  o.analyzer = need("analyzer", string, "a string").get<std::string>();
  o.min_n = need("min_n", integer, "an integer").get<int64_t>();
  o.max_n = need("max_n", integer, "an integer").get<int64_t>();
  o.buckets = need("buckets", integer, "an integer").get<int64_t>();
  o.word_ngrams = need("word_ngrams", integer, "an integer").get<int64_t>();
  o.lowercase = need("lowercase", boolean, "true or false").get<bool>();
  o.distinct = need("distinct", boolean, "true or false").get<bool>();
  *prepend_cls = need("prepend_cls", boolean, "true or false").get<bool>();
  if (j.contains("term_counts")) o.term_counts = need("term_counts", boolean, "true or false").get<bool>();
  try {
    validate(o);
  } catch (const Error& e) {
    throw_input_error(path.string(), e.what());
  }
  return o;
}

}  // namespace tandem::data
