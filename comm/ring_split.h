// The ring's split of a buffer: `count` elements into n segments that differ
// by at most one element (the first count % n have one more). Every
// algorithm that gives rank r "segment r" (the ring, single copy, shared
// buffers) uses this one, so they agree on who owns which bytes and their
// results stay bitwise the ring's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tandem::comm {

struct RingSegment {
  size_t offset = 0;  // bytes
  size_t bytes = 0;
};

inline RingSegment ring_segment(int64_t count, int n, int i, size_t esz) {
  const int64_t base = count / n, rem = count % n;
  const int64_t first = i * base + std::min<int64_t>(i, rem);
  return {static_cast<size_t>(first) * esz, static_cast<size_t>(base + (i < rem ? 1 : 0)) * esz};
}

}  // namespace tandem::comm
