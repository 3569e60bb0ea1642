// Freed host blocks kept for reuse, by size (core/allocator.cc owns the one
// instance, its lock and the system calls; this type only keeps the books).
//
// Promises: take(n) hands back a block put() with exactly size n, the most
// recently put first (its lines are the likeliest to be in cache), or nullptr;
// put() keeps the cached bytes within the limit it is given by returning the
// blocks the caller must free now, oldest first, and returns the new block
// itself when it alone is over the limit. Not thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <utility>
#include <vector>

namespace tandem {

class HostBlockCache {
 public:
  struct Block {
    void* p;
    size_t bytes;
  };

  void* take(size_t bytes);
  std::vector<Block> put(void* p, size_t bytes, size_t limit);
  // Every cached block, for the caller to free; the cache is empty afterwards.
  std::vector<Block> drain();
  size_t cached_bytes() const { return cached_bytes_; }

 private:
  std::list<Block> by_age_;  // oldest first
  std::multimap<size_t, std::list<Block>::iterator> by_size_;  // equal sizes in put order
  size_t cached_bytes_ = 0;
};

}  // namespace tandem
