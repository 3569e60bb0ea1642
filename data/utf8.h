// UTF-8 validation (RFC 3629) for every text that enters Tandem.
//
// A reader validates a whole file before parsing it, so a bad byte is reported
// once, with its line and byte offset, instead of turning into a mangled token.
// Rejected: stray continuation bytes, truncated sequences, overlong encodings,
// UTF-16 surrogates (U+D800..U+DFFF) and code points above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem::data {

// The byte offset of the first invalid sequence in `bytes`, or nullopt when all of it is valid UTF-8.
std::optional<size_t> find_invalid_utf8(std::string_view bytes);

// Returned by decode_utf8 for an invalid sequence.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// Decodes the code point starting at bytes[i] (i < size) and stores its length in
// *length. On an invalid sequence returns kInvalidCodePoint with *length = 1, so
// callers that must not throw (the tokenizer) still make progress.
char32_t decode_utf8(std::string_view bytes, size_t i, size_t* length);

// Appends the UTF-8 encoding of `cp` (<= U+10FFFF, not a surrogate) to `out`.
template <class String>
void append_utf8(String& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tandem::data
