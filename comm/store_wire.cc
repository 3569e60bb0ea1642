#include "comm/store_wire.h"

#include "core/check.h"

namespace tandem::comm::wire {

Writer& Writer::u8(uint8_t v) {
  payload_.push_back(static_cast<char>(v));
  return *this;
}

Writer& Writer::i64(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) payload_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::bytes(std::string_view s) {
  TANDEM_CHECK(s.size() <= kMaxFrameBytes, "store message field of {} bytes is too large", s.size());
  auto n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) payload_.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  payload_.append(s);
  return *this;
}

std::string Writer::frame() const {
  TANDEM_CHECK(payload_.size() <= kMaxFrameBytes, "store message of {} bytes exceeds the {} byte limit",
               payload_.size(), kMaxFrameBytes);
  auto n = static_cast<uint32_t>(payload_.size());
  std::string out;
  out.reserve(4 + payload_.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(payload_);
  return out;
}

std::string_view Reader::take(size_t n) {
  TANDEM_CHECK(n <= rest_.size(), "truncated store message: field of {} bytes, {} left", n, rest_.size());
  std::string_view out = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return out;
}

uint8_t Reader::u8() { return static_cast<uint8_t>(take(1)[0]); }

int64_t Reader::i64() {
  std::string_view b = take(8);
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
  return static_cast<int64_t>(u);
}

std::string Reader::bytes() {
  std::string_view h = take(4);
  uint32_t n = decode_length(reinterpret_cast<const unsigned char*>(h.data()));
  return std::string(take(n));
}

uint32_t decode_length(const unsigned char header[4]) {
  return static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
         static_cast<uint32_t>(header[2]) << 16 | static_cast<uint32_t>(header[3]) << 24;
}

}  // namespace tandem::comm::wire
