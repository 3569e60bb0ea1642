#include <gtest/gtest.h>

#include "core/check.h"
#include "ddp/bucket_assignment.h"

namespace tandem::ddp {
namespace {

std::vector<ParamDesc> f32_params(std::vector<size_t> bytes) {
  std::vector<ParamDesc> out;
  for (size_t b : bytes) out.push_back(ParamDesc{b, DType::F32, Device::cpu()});
  return out;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

std::vector<std::vector<int>> groups(const std::vector<BucketSpec>& b) {
  std::vector<std::vector<int>> out;
  for (const auto& s : b) out.push_back(s.params);
  return out;
}

TEST(BucketAssignment, FirstBucketUsesTheSmallCapThenTheLargeOne) {
  auto b = assign_buckets(f32_params({40, 40, 40, 40, 40, 40}), iota(6), 50, 100);
  // first cap 50: closes after 80 bytes; then cap 100: 120 bytes; the rest stays open.
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}, {5}}));
  EXPECT_EQ(b[1].bytes, 120u);
}

TEST(BucketAssignment, CapZeroGivesOneBucketPerParameter) {
  auto b = assign_buckets(f32_params({4, 8, 12}), iota(3), 0, 0);
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{0}, {1}, {2}}));
}

TEST(BucketAssignment, HugeCapGivesOneBucket) {
  auto b = assign_buckets(f32_params({4, 8, 12}), iota(3), size_t{1} << 60, size_t{1} << 60);
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{0, 1, 2}}));
}

TEST(BucketAssignment, AParameterLargerThanTheCapIsNeverSplit) {
  auto b = assign_buckets(f32_params({1000, 4}), iota(2), 10, 10);
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(b[0].bytes, 1000u);
}

TEST(BucketAssignment, FollowsTheGivenOrder) {
  auto b = assign_buckets(f32_params({4, 4, 4, 4}), {3, 1, 2, 0}, 8, 8);
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{3, 1}, {2, 0}}));
}

TEST(BucketAssignment, DtypesAndDevicesGetSeparateBuckets) {
  std::vector<ParamDesc> p = {{4, DType::F32, Device::cpu()},
                              {4, DType::BF16, Device::cpu()},
                              {4, DType::F32, Device::cpu()},
                              {4, DType::F32, Device::cuda(0)}};
  auto b = assign_buckets(p, iota(4), 100, 100);
  EXPECT_EQ(groups(b), (std::vector<std::vector<int>>{{0, 2}, {1}, {3}}));
  EXPECT_EQ(b[1].dtype, DType::BF16);
  EXPECT_EQ(b[2].device, Device::cuda(0));
}

TEST(BucketAssignment, OrderMustBeAPermutation) {
  EXPECT_THROW(assign_buckets(f32_params({4, 4}), {0, 0}, 8, 8), Error);
  EXPECT_THROW(assign_buckets(f32_params({4, 4}), {0}, 8, 8), Error);
}

// --- Rank 0's layout as the rebuild sends it (sync_bucket_indices) ----------------

TEST(BucketIndices, ALayoutSurvivesItsWireForm) {
  std::vector<ParamDesc> p = {{40, DType::F32, Device::cpu()}, {8, DType::BF16, Device::cpu()},
                              {40, DType::F32, Device::cpu()}, {40, DType::F32, Device::cpu()}};
  auto layout = assign_buckets(p, {3, 1, 2, 0}, 50, 100);
  BucketIndices wire = bucket_indices(layout);
  EXPECT_EQ(wire.counts, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(wire.indices, (std::vector<int64_t>{3, 2, 1, 0}));
  auto back = buckets_from_indices(p, wire);
  ASSERT_EQ(back.size(), layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(back[i].params, layout[i].params);
    EXPECT_EQ(back[i].bytes, layout[i].bytes);
    EXPECT_EQ(back[i].dtype, layout[i].dtype);
    EXPECT_EQ(back[i].device, layout[i].device);
  }
}

void expect_error(const std::vector<ParamDesc>& p, const BucketIndices& in, const std::string& message) {
  try {
    buckets_from_indices(p, in);
    FAIL() << "expected an error containing: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(BucketIndices, ALayoutThatDoesNotFitThisRanksParametersIsNamed) {
  auto p = f32_params({4, 4, 4});
  expect_error(p, {{2, 1}, {0, 1, 1}}, "bucket 1 holds parameter index 1, already in a bucket");
  expect_error(p, {{3}, {0, 1, 7}}, "bucket 0 holds parameter index 7, of 3 parameters");
  expect_error(p, {{2}, {0, 1}}, "1 buckets holding 2 parameters with 2 indices, for 3 parameters on this rank");
  expect_error(p, {{3, 0}, {0, 1, 2}}, "a bucket of 0 parameters");
  std::vector<ParamDesc> mixed = {{4, DType::F32, Device::cpu()}, {4, DType::BF16, Device::cpu()}};
  expect_error(mixed, {{2}, {0, 1}}, "bucket 0 mixes f32 on cpu with parameter 1 (bf16 on cpu)");
}

}  // namespace
}  // namespace tandem::ddp
