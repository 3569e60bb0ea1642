#include "core/host_block_cache.h"

#include <iterator>

namespace tandem {

void* HostBlockCache::take(size_t bytes) {
  auto last = by_size_.upper_bound(bytes);
  if (last == by_size_.begin()) return nullptr;
  --last;
  if (last->first != bytes) return nullptr;
  void* p = last->second->p;
  by_age_.erase(last->second);
  by_size_.erase(last);
  cached_bytes_ -= bytes;
  return p;
}

std::vector<HostBlockCache::Block> HostBlockCache::put(void* p, size_t bytes, size_t limit) {
  if (bytes > limit) return {{p, bytes}};
  std::vector<Block> evicted;
  while (cached_bytes_ + bytes > limit) {
    Block oldest = by_age_.front();
    // Equal sizes are kept in put order, so the oldest block is the first of its size.
    by_size_.erase(by_size_.lower_bound(oldest.bytes));
    by_age_.pop_front();
    cached_bytes_ -= oldest.bytes;
    evicted.push_back(oldest);
  }
  by_age_.push_back({p, bytes});
  by_size_.emplace(bytes, std::prev(by_age_.end()));
  cached_bytes_ += bytes;
  return evicted;
}

std::vector<HostBlockCache::Block> HostBlockCache::drain() {
  std::vector<Block> all(by_age_.begin(), by_age_.end());
  by_age_.clear();
  by_size_.clear();
  cached_bytes_ = 0;
  return all;
}

}  // namespace tandem
