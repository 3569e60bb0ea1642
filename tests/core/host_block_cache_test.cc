// HostBlockCache keeps the books only, so these tests hand it made-up addresses.
#include "core/host_block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tandem {
namespace {

void* at(uintptr_t a) { return reinterpret_cast<void*>(a); }

TEST(HostBlockCache, HandsBackABlockOfTheSameSize) {
  HostBlockCache c;
  EXPECT_TRUE(c.put(at(0x1000), 4096, 1 << 20).empty());
  EXPECT_EQ(c.cached_bytes(), 4096u);
  EXPECT_EQ(c.take(4096), at(0x1000));
  EXPECT_EQ(c.cached_bytes(), 0u);
  EXPECT_EQ(c.take(4096), nullptr);
}

TEST(HostBlockCache, HandsBackNothingForAnotherSize) {
  HostBlockCache c;
  c.put(at(0x1000), 8192, 1 << 20);
  EXPECT_EQ(c.take(4096), nullptr);
  EXPECT_EQ(c.take(12288), nullptr);
  EXPECT_EQ(c.take(8192), at(0x1000));
}

TEST(HostBlockCache, HandsBackTheMostRecentlyPutBlockFirst) {
  HostBlockCache c;
  c.put(at(0x1000), 4096, 1 << 20);
  c.put(at(0x9000), 8192, 1 << 20);
  c.put(at(0x2000), 4096, 1 << 20);
  EXPECT_EQ(c.take(4096), at(0x2000));
  EXPECT_EQ(c.take(4096), at(0x1000));
}

TEST(HostBlockCache, GivesUpTheOldestBlocksToStayWithinTheLimit) {
  HostBlockCache c;
  c.put(at(0x1000), 4096, 16384);
  c.put(at(0x2000), 8192, 16384);
  c.put(at(0x3000), 4096, 16384);
  auto evicted = c.put(at(0x4000), 8192, 16384);  // 24 KiB would be cached: the two oldest go
  ASSERT_EQ(evicted.size(), 2u);
  EXPECT_EQ(evicted[0].p, at(0x1000));
  EXPECT_EQ(evicted[0].bytes, 4096u);
  EXPECT_EQ(evicted[1].p, at(0x2000));
  EXPECT_EQ(evicted[1].bytes, 8192u);
  EXPECT_EQ(c.cached_bytes(), 12288u);
  EXPECT_EQ(c.take(8192), at(0x4000));
  EXPECT_EQ(c.take(8192), nullptr);  // the evicted one is no longer handed out
  EXPECT_EQ(c.take(4096), at(0x3000));
}

TEST(HostBlockCache, ReturnsABlockLargerThanTheLimitAtOnce) {
  HostBlockCache c;
  c.put(at(0x1000), 4096, 16384);
  auto evicted = c.put(at(0x8000), 32768, 16384);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].p, at(0x8000));
  EXPECT_EQ(c.cached_bytes(), 4096u);  // what was cached stays
  EXPECT_EQ(c.take(4096), at(0x1000));
}

TEST(HostBlockCache, DrainGivesEveryBlockBackAndEmptiesIt) {
  HostBlockCache c;
  c.put(at(0x1000), 4096, 1 << 20);
  c.put(at(0x2000), 8192, 1 << 20);
  auto all = c.drain();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].p, at(0x1000));
  EXPECT_EQ(all[1].p, at(0x2000));
  EXPECT_EQ(c.cached_bytes(), 0u);
  EXPECT_EQ(c.take(4096), nullptr);
}

}  // namespace
}  // namespace tandem
