// Fixed-width little-endian integers in byte buffers: how the ring's hello
// message and frame headers are laid out on the wire, whatever the host's order.
#pragma once

#include <cstdint>

namespace tandem::comm {

// Writes the low `bytes` bytes of `v` to p[0..bytes), least significant first.
inline void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// Reads `bytes` bytes from p, least significant first.
inline uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace tandem::comm
