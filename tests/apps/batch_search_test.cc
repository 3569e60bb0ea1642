// find-batch-size's search, against injected probes: no memory is exhausted.
#include "apps/batch_search.h"

#include <gtest/gtest.h>

#include <new>
#include <set>

#include "core/check.h"

namespace tandem::apps {
namespace {

// Fits up to `limit`; counts the trials.
struct FakeDevice {
  int64_t limit;
  std::vector<int64_t> tried;
  Probe probe() {
    return [this](int64_t b) {
      tried.push_back(b);
      if (b <= limit) return ProbeResult{true, b * 1000, ""};
      return ProbeResult{false, 0, "CUDA out of memory"};
    };
  }
};

TEST(BatchSearch, FindsTheExactLimitByDoublingThenBisecting) {
  for (int64_t limit : {1, 7, 8, 9, 100, 1000, 4095}) {
    FakeDevice d{limit, {}};
    const BatchSearchResult r = search_max_batch(d.probe(), {8, 65536, 1});
    EXPECT_EQ(r.max_batch, limit);
    EXPECT_FALSE(r.hit_upper_bound);
    EXPECT_EQ(r.trials.size(), d.tried.size());
    EXPECT_LE(r.trials.size(), 30u) << "limit " << limit;  // logarithmic, not a scan
  }
}

TEST(BatchSearch, EveryTrialIsRecordedWithItsOutcome) {
  FakeDevice d{20, {}};
  const BatchSearchResult r = search_max_batch(d.probe(), {8, 1024, 1});
  EXPECT_EQ(d.tried, (std::vector<int64_t>{8, 16, 32, 24, 20, 22, 21}));
  for (const report::BatchTrial& t : r.trials) {
    EXPECT_EQ(t.fits, t.batch <= 20);
    EXPECT_EQ(t.error.empty(), t.fits);
  }
}

TEST(BatchSearch, ShrinksWhenTheStartDoesNotFit) {
  FakeDevice d{5, {}};
  EXPECT_EQ(search_max_batch(d.probe(), {64, 1024, 1}).max_batch, 5);
}

TEST(BatchSearch, NothingFitsGivesZero) {
  FakeDevice d{0, {}};
  const BatchSearchResult r = search_max_batch(d.probe(), {8, 1024, 1});
  EXPECT_EQ(r.max_batch, 0);
  EXPECT_FALSE(r.trials.empty());
}

TEST(BatchSearch, StopsAtTheUpperBound) {
  FakeDevice d{1 << 30, {}};
  const BatchSearchResult r = search_max_batch(d.probe(), {8, 100, 1});
  EXPECT_EQ(r.max_batch, 100);
  EXPECT_TRUE(r.hit_upper_bound);
  EXPECT_EQ(d.tried.back(), 100);
}

TEST(BatchSearch, OnlyTriesMultiples) {
  FakeDevice d{100, {}};
  const BatchSearchResult r = search_max_batch(d.probe(), {5, 65536, 8});
  EXPECT_EQ(r.max_batch, 96);
  for (int64_t b : d.tried) EXPECT_EQ(b % 8, 0) << b;
}

TEST(BatchSearch, EachSizeIsTriedOnce) {
  FakeDevice d{777, {}};
  search_max_batch(d.probe(), {8, 65536, 1});
  EXPECT_EQ(std::set<int64_t>(d.tried.begin(), d.tried.end()).size(), d.tried.size());
}

TEST(BatchSearch, BadOptionsAreErrors) {
  FakeDevice d{10, {}};
  EXPECT_THROW(search_max_batch(d.probe(), {8, 4, 8}), Error);
  EXPECT_THROW(search_max_batch(d.probe(), {8, 64, 0}), Error);
}

TEST(OutOfMemory, RecognisesAllocatorAndCublasFailures) {
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(Error("core/allocator.cc:132: CUDA out of memory on cuda:0 allocating 1 bytes")));
  EXPECT_TRUE(is_out_of_memory(Error("core/allocator.cc:54: out of host memory allocating 8 bytes")));
  EXPECT_TRUE(is_out_of_memory(Error("kernels/linear.cc:10: cuBLAS error CUBLAS_STATUS_ALLOC_FAILED")));
  EXPECT_FALSE(is_out_of_memory(Error("config: d_model 30 is not divisible by n_heads 4")));
}

TEST(RunTrial, AnAllocationFailureIsATrialThatDoesNotFit) {
  const ProbeResult r =
      run_trial([]() -> int64_t { TANDEM_FAIL("CUDA out of memory on cuda:0 allocating 1 bytes"); }, 0);
  EXPECT_FALSE(r.fits);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos);
  EXPECT_FALSE(run_trial([]() -> int64_t { throw std::bad_alloc(); }, 0).fits);
}

TEST(RunTrial, OtherErrorsAreNotMistakenForMemory) {
  EXPECT_THROW(run_trial([]() -> int64_t { TANDEM_FAIL("a bug"); }, 0), Error);
}

TEST(RunTrial, APeakOverTheLimitDoesNotFit) {
  EXPECT_TRUE(run_trial([] { return int64_t{1000}; }, 1000).fits);
  const ProbeResult r = run_trial([] { return int64_t{1001}; }, 1000);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.peak_bytes, 1001);
  EXPECT_NE(r.error.find("over the limit"), std::string::npos);
  EXPECT_TRUE(run_trial([] { return int64_t{1} << 40; }, 0).fits);  // no limit
}

}  // namespace
}  // namespace tandem::apps
