#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "data/distributed_sampler.h"
#include "data/length_grouping.h"
#include "data/permutation.h"
#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::vector<DistributedSampler> all_ranks(int64_t n, int64_t world, bool shuffle, bool drop_last, uint64_t seed = 0,
                                          int64_t epoch = 0) {
  std::vector<DistributedSampler> out;
  for (int64_t r = 0; r < world; ++r) {
    out.emplace_back(n, SamplerOptions{world, r, shuffle, seed, drop_last});
    out.back().set_epoch(epoch);
  }
  return out;
}

// torch.utils.data.DistributedSampler is the reference: tests/fixtures/data/make_fixtures.py.
TEST(DistributedSampler, UnshuffledShardsMatchPyTorch) {
  std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/sampler_torch.txt");
  ASSERT_TRUE(in) << "missing fixture sampler_torch.txt";
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int64_t n, world, drop, rank, v;
    fields >> n >> world >> drop >> rank;
    std::vector<int64_t> expected;
    while (fields >> v) expected.push_back(v);
    DistributedSampler s(n, SamplerOptions{world, rank, false, 0, drop != 0});
    EXPECT_EQ(s.indices(), expected) << line;
    EXPECT_EQ(s.num_samples(), static_cast<int64_t>(expected.size())) << line;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(DistributedSampler, ShuffledShardsAreDisjointAndCoverTheDataset) {
  for (bool drop_last : {false, true}) {
    auto ranks = all_ranks(120, 4, true, drop_last, 3, 5);  // 120 divides evenly: no padding, nothing dropped
    std::vector<int64_t> all;
    for (const auto& s : ranks) {
      auto mine = s.indices();
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expected(120);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected);
  }
}

TEST(DistributedSampler, EveryRankGetsTheSameNumberOfSamples) {
  for (int64_t n : {1, 7, 100, 101, 103}) {
    for (bool drop_last : {false, true}) {
      if (drop_last && n < 4) continue;
      auto ranks = all_ranks(n, 4, true, drop_last, 9);
      for (const auto& s : ranks) EXPECT_EQ(static_cast<int64_t>(s.indices().size()), ranks[0].num_samples());
      EXPECT_EQ(ranks[0].num_samples(), drop_last ? n / 4 : (n + 3) / 4) << n;
    }
  }
}

TEST(DistributedSampler, PaddingRepeatsTheStartOfTheEpochOrder) {
  DistributedSampler s(10, SamplerOptions{4, 0, true, 1, false});
  auto order = s.global_indices();
  ASSERT_EQ(order.size(), 12u);
  EXPECT_EQ(order[10], order[0]);
  EXPECT_EQ(order[11], order[1]);
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.begin() + 10).size(), 10u);  // the first n are a permutation
}

TEST(DistributedSampler, DropLastCutsTheTailAndKeepsShardsDisjoint) {
  auto ranks = all_ranks(103, 4, true, true, 2);
  std::set<int64_t> seen;
  for (const auto& s : ranks)
    for (int64_t i : s.indices()) EXPECT_TRUE(seen.insert(i).second) << i << " on two ranks";
  EXPECT_EQ(seen.size(), 100u);
}

TEST(DistributedSampler, EveryRankSeesTheSamePermutation) {
  auto ranks = all_ranks(57, 3, true, false, 11, 2);
  for (const auto& s : ranks) EXPECT_EQ(s.global_indices(), ranks[0].global_indices());
}

TEST(DistributedSampler, OrderChangesAcrossEpochsAndSeedsButRepeatsForTheSameOnes) {
  DistributedSampler a(200, SamplerOptions{2, 1, true, 5, false}), b(200, SamplerOptions{2, 1, true, 5, false});
  a.set_epoch(3);
  b.set_epoch(3);
  EXPECT_EQ(a.indices(), b.indices());
  b.set_epoch(4);
  EXPECT_NE(a.indices(), b.indices());
  DistributedSampler c(200, SamplerOptions{2, 1, true, 6, false});
  c.set_epoch(3);
  EXPECT_NE(a.indices(), c.indices());
}

TEST(DistributedSampler, WithoutShuffleTheOrderIsTheDatasetOrder) {
  DistributedSampler s(5, SamplerOptions{1, 0, false, 0, false});
  s.set_epoch(9);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSampler, StateRoundTripsAndRefusesAnotherConfiguration) {
  DistributedSampler s(50, SamplerOptions{2, 0, true, 8, false});
  s.set_epoch(3);
  s.set_position(10);
  SamplerState saved = s.state();
  DistributedSampler t(50, SamplerOptions{2, 0, true, 8, false});
  t.load_state(saved);
  EXPECT_EQ(t.epoch(), 3);
  EXPECT_EQ(t.position(), 10);
  EXPECT_EQ(t.indices(), s.indices());

  DistributedSampler other_world(50, SamplerOptions{4, 0, true, 8, false});
  EXPECT_THAT(error_of([&] { other_world.load_state(saved); }), HasSubstr("saved with world size 2, this run has 4"));
  DistributedSampler other_seed(50, SamplerOptions{2, 0, true, 9, false});
  EXPECT_THAT(error_of([&] { other_seed.load_state(saved); }), HasSubstr("saved with seed 8"));
  DistributedSampler other_size(51, SamplerOptions{2, 0, true, 8, false});
  EXPECT_THAT(error_of([&] { other_size.load_state(saved); }), HasSubstr("saved for 50 examples"));
  SamplerState beyond = saved;
  beyond.position = 26;
  EXPECT_THAT(error_of([&] { t.load_state(beyond); }), HasSubstr("position 26 is outside [0, 25]"));
}

TEST(DistributedSampler, BadConfigurationsAreErrors) {
  EXPECT_THAT(error_of([] { DistributedSampler(10, SamplerOptions{2, 2}); }), HasSubstr("rank 2 is outside [0, 2)"));
  EXPECT_THAT(error_of([] { DistributedSampler(0, SamplerOptions{}); }), HasSubstr("the dataset is empty"));
  EXPECT_THAT(error_of([] {
                DistributedSampler(3, SamplerOptions{4, 0, true, 0, true});
              }),
              HasSubstr("fewer than the world size 4 with drop_last"));
}

// --- group_by_length ---------------------------------------------------------------

SamplerOptions grouped(int64_t world, int64_t rank, const std::vector<int64_t>& lengths, int64_t batch) {
  SamplerOptions o{world, rank, true, 11, false};
  o.lengths = std::make_shared<const std::vector<int64_t>>(lengths);
  o.batch_size = batch;
  return o;
}

TEST(DistributedSampler, GroupedByLengthTheGlobalOrderIsTheGroupedPermutation) {
  std::vector<int64_t> lengths(300);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<int64_t>((i * 37) % 101);
  DistributedSampler plain(300, SamplerOptions{2, 0, true, 11, false}), g(300, grouped(2, 0, lengths, 4));
  plain.set_epoch(3);
  g.set_epoch(3);
  EXPECT_EQ(g.global_indices(), group_by_length(plain.global_indices(), lengths, 8));  // 4 per rank x 2 ranks
}

TEST(DistributedSampler, GroupedByLengthEveryRanksBatchOfAStepHasAboutTheSameLengths) {
  // 2000 examples of lengths 1..500, 4 ranks of 8: a step's 32 rows come from one stretch of a
  // megabatch of 50 x 32 sorted rows, so they span a few lengths, on every rank.
  std::vector<int64_t> lengths(2000);
  for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = 1 + static_cast<int64_t>((i * 7919) % 500);
  std::vector<std::vector<int64_t>> shards;
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 4; ++r) {
    DistributedSampler s(2000, grouped(4, r, lengths, 8));
    s.set_epoch(1);
    shards.push_back(s.indices());
    seen.insert(shards.back().begin(), shards.back().end());
  }
  EXPECT_EQ(seen.size(), 2000u);  // disjoint shards still cover the data set
  double spread = 0;
  const int64_t steps = 2000 / 32;
  for (int64_t k = 0; k < steps; ++k) {
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& shard : shards)
      for (int64_t i = 0; i < 8; ++i) {
        const int64_t len = lengths[static_cast<size_t>(shard[static_cast<size_t>(k * 8 + i)])];
        lo = std::min(lo, len);
        hi = std::max(hi, len);
      }
    if (k > 0) spread += static_cast<double>(hi - lo);  // step 0 holds the swapped-in longest example
  }
  // Random batches would span most of 1..500 (about 470 on average for 32 draws); sorted ones ~ 500 / 50.
  EXPECT_LT(spread / static_cast<double>(steps - 1), 40.0);
}

TEST(DistributedSampler, GroupedByLengthNeedsALengthPerExampleAndABatch) {
  EXPECT_THAT(error_of([] { DistributedSampler(10, grouped(1, 0, {1, 2, 3}, 2)); }), HasSubstr("3 lengths for 10 examples"));
  EXPECT_THAT(error_of([] { DistributedSampler(3, grouped(1, 0, {1, 2, 3}, 0)); }), HasSubstr("batch_size must be at least 1"));
}

TEST(SeededPermutation, IsAPermutationAndDependsOnSeedAndStream) {
  auto p = seeded_permutation(1000, 1, 0);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(p, seeded_permutation(1000, 1, 0));
  EXPECT_NE(p, seeded_permutation(1000, 2, 0));
  EXPECT_NE(p, seeded_permutation(1000, 1, 1));
}

// Each of the 6 orders of 3 elements should appear about 1/6 of the time: a chi-square
// test at a generous threshold (the seeds are fixed, so this is deterministic).
TEST(SeededPermutation, AllOrdersOfThreeAreEquallyLikely) {
  std::map<std::vector<int64_t>, int> counts;
  const int trials = 6000;
  for (int s = 0; s < trials; ++s) counts[seeded_permutation(3, 77, static_cast<uint64_t>(s))]++;
  ASSERT_EQ(counts.size(), 6u);
  double chi2 = 0;
  for (const auto& [order, c] : counts) chi2 += (c - trials / 6.0) * (c - trials / 6.0) / (trials / 6.0);
  EXPECT_LT(chi2, 20.5);  // p = 0.001 for 5 degrees of freedom
}

TEST(PhiloxWords, BelowStaysInRange) {
  PhiloxWords w(3, 4);
  for (uint64_t bound : {1ull, 2ull, 3ull, 1000ull, (1ull << 63) + 5}) {
    for (int i = 0; i < 100; ++i) EXPECT_LT(w.below(bound), bound);
  }
}

}  // namespace
}  // namespace tandem::data
