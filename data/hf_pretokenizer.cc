#include "data/hf_pretokenizer.h"

#include <algorithm>

#include "data/hf_unicode_tables.h"
#include "data/utf8.h"

namespace tandem::data::hf {

namespace {

bool in_ranges(const CodePointRange* ranges, size_t count, char32_t c) {
  const CodePointRange* end = ranges + count;
  const CodePointRange* it =
      std::upper_bound(ranges, end, c, [](char32_t v, const CodePointRange& r) { return v < r.lo; });
  return it != ranges && c <= (it - 1)->hi;
}

enum class Kind { Word, Other, Space };

Kind kind_at(std::string_view text, size_t pos, size_t* len) {
  const auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    *len = 1;
    const char32_t c = b;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') return Kind::Word;
    return is_space_char(c) ? Kind::Space : Kind::Other;
  }
  const char32_t c = decode_utf8(text, pos, len);
  if (c == kInvalidCodePoint) return Kind::Other;
  if (is_word_char(c)) return Kind::Word;
  return is_space_char(c) ? Kind::Space : Kind::Other;
}

}  // namespace

bool is_word_char(char32_t c) { return in_ranges(kWordRanges, kWordRangesCount, c); }
bool is_space_char(char32_t c) { return in_ranges(kSpaceRanges, kSpaceRangesCount, c); }

void lowercase_into(std::string_view text, std::string& out) {
  out.reserve(out.size() + text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      out.push_back(b >= 'A' && b <= 'Z' ? static_cast<char>(b + 32) : static_cast<char>(b));
      ++pos;
      continue;
    }
    size_t len = 1;
    const char32_t c = decode_utf8(text, pos, &len);
    const LowercaseEntry* end = kLowercase + kLowercaseCount;
    const LowercaseEntry* it =
        std::lower_bound(kLowercase, end, c, [](const LowercaseEntry& e, char32_t v) { return e.code_point < v; });
    if (c != kInvalidCodePoint && it != end && it->code_point == c) {
      out.append(it->lower);
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
}

void for_each_pretoken(std::string_view normalized, const std::function<void(std::string_view)>& on_word) {
  size_t pos = 0, start = 0;
  Kind run = Kind::Space;  // the kind of the pre-token being collected (Space: none)
  while (pos < normalized.size()) {
    size_t len = 1;
    const Kind k = kind_at(normalized, pos, &len);
    if (k != run) {
      if (run != Kind::Space) on_word(normalized.substr(start, pos - start));
      run = k;
      start = pos;
    }
    pos += len;
  }
  if (run != Kind::Space) on_word(normalized.substr(start));
}

}  // namespace tandem::data::hf
