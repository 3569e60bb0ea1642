#include "data/utf8.h"

namespace tandem::data {

namespace {

// Length of the valid sequence starting at s[i], or 0 when it is invalid. The
// second-byte ranges are those of RFC 3629's grammar, which is what excludes
// overlong forms, surrogates and code points above U+10FFFF.
size_t valid_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 == 0xE0) {
    n = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    n = 3;
  } else if (b0 == 0xED) {
    n = 3, hi = 0x9F;
  } else if (b0 == 0xF0) {
    n = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    n = 4;
  } else if (b0 == 0xF4) {
    n = 4, hi = 0x8F;
  } else {
    return 0;  // a continuation byte, C0/C1 (always overlong) or F5..FF
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    // Fast path over ASCII, eight bytes at a time.
    while (i + 8 <= bytes.size()) {
      uint64_t w = 0;
      for (int k = 0; k < 8; ++k) w |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i + k])) << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= bytes.size()) break;
    size_t n = valid_sequence_length(bytes, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

char32_t decode_utf8(std::string_view bytes, size_t i, size_t* length) {
  const size_t n = valid_sequence_length(bytes, i);
  auto byte = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(bytes[i + k])); };
  switch (n) {
    case 1:
      *length = 1;
      return byte(0);
    case 2:
      *length = 2;
      return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      *length = 3;
      return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    case 4:
      *length = 4;
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    default:
      *length = 1;
      return kInvalidCodePoint;
  }
}

}  // namespace tandem::data
