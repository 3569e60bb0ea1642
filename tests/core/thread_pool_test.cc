// The intra-op thread pool: how its size is chosen from the environment, and
// that parallel_for covers a range exactly once, nests, and reports errors.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"

namespace tandem {
namespace {

TEST(ThreadCount, TandemNumThreadsWinsOverEverythingElse) {
  const ThreadCountChoice c = choose_intra_op_threads("3", "5", "2", 16);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.reason, "TANDEM_NUM_THREADS=3");
}

TEST(ThreadCount, OmpNumThreadsIsUsedWhenTandemNumThreadsIsUnset) {
  EXPECT_EQ(choose_intra_op_threads(nullptr, "5", "2", 16).threads, 5);
  EXPECT_EQ(choose_intra_op_threads("", "5", nullptr, 16).threads, 5);
  // A per-nesting-level list: the outer level's count.
  EXPECT_EQ(choose_intra_op_threads(nullptr, "4,2", nullptr, 16).threads, 4);
}

TEST(ThreadCount, LocalRanksShareTheCoresWithoutOversubscribing) {
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "2", 2).threads, 1);
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "1", 2).threads, 2);
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "4", 16).threads, 4);
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "3", 16).threads, 5);  // rounded down
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "8", 2).threads, 1);   // never 0
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, nullptr, 6).threads, 6);
  EXPECT_EQ(choose_intra_op_threads(nullptr, nullptr, "2", 2).reason, "2 cores / 2 local ranks");
}

TEST(ThreadCount, BadValuesAreErrorsNamingTheVariable) {
  for (const char* bad : {"0", "-1", "two", "3x"}) {
    try {
      choose_intra_op_threads(bad, nullptr, nullptr, 2);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("TANDEM_NUM_THREADS=") + bad), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(choose_intra_op_threads(nullptr, "0", nullptr, 2), Error);
  EXPECT_THROW(choose_intra_op_threads(nullptr, nullptr, "none", 2), Error);
}

TEST(ThreadCount, AvailableCoresIsPositive) { EXPECT_GE(available_cores(), 1); }

// Restores the pool size a test changed.
class ThreadPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { set_intra_op_threads(before_); }
  int before_ = intra_op_threads();
};

TEST_F(ThreadPoolTest, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    set_intra_op_threads(threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        parallel_for(10, 10 + n, grain, [&](int64_t lo, int64_t hi) {
          ASSERT_LE(10, lo);
          ASSERT_LE(hi, 10 + n);
          for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i - 10)]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << threads << " " << n << " " << i;
      }
    }
  }
}

TEST_F(ThreadPoolTest, ARangeSmallerThanTheGrainIsOneCallOnTheCaller) {
  set_intra_op_threads(4);
  int calls = 0;
  parallel_for(0, 10, 16, [&](int64_t lo, int64_t hi) {
    ++calls;
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 10);
  });
  EXPECT_EQ(calls, 1);
}

TEST_F(ThreadPoolTest, NestedParallelForRunsAndCoversTheInnerRange) {
  set_intra_op_threads(3);
  std::atomic<int64_t> total{0};
  parallel_for(0, 8, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      parallel_for(0, 100, 1, [&](int64_t a, int64_t b) { total += b - a; });
  });
  EXPECT_EQ(total.load(), 800);
}

TEST_F(ThreadPoolTest, AnExceptionInATaskReachesTheCaller) {
  set_intra_op_threads(3);
  EXPECT_THROW(parallel_for(0, 30, 1,
                            [&](int64_t lo, int64_t) {
                              if (lo > 0) throw std::runtime_error("task failed");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> n{0};
  parallel_for(0, 30, 1, [&](int64_t lo, int64_t hi) { n += hi - lo; });
  EXPECT_EQ(n.load(), 30);
}

TEST_F(ThreadPoolTest, ResizingToZeroThreadsIsAnError) { EXPECT_THROW(set_intra_op_threads(0), Error); }

}  // namespace
}  // namespace tandem
