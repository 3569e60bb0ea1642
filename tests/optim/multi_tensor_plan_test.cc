// How the fused optimizers' tensor lists are cut into CUDA launches
// (optim/multi_tensor_plan.h), checked on the host: the pointers are never
// dereferenced here.
#include "optim/multi_tensor_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem::optim::mt {
namespace {

float* at(uintptr_t address) { return reinterpret_cast<float*>(address); }

// n tensors of `numel` elements whose operands are all 16-byte aligned.
TensorList aligned_list(int n, int64_t numel, int depth) {
  TensorList list;
  for (int i = 0; i < n; ++i) {
    TensorListEntry e;
    for (int d = 0; d < depth; ++d) e.ptr[static_cast<size_t>(d)] = at(0x100000u * (d + 1) + 0x1000u * i);
    e.numel = numel;
    list.push_back(e);
  }
  return list;
}

TEST(MultiTensorPlan, OnlyTheTensorWithAnUnalignedOperandLosesVectorisation) {
  TensorList list = aligned_list(3, 100, 4);
  list[1].ptr[1] = at(0x5004);  // a gradient view 4 bytes past a 16-byte boundary
  int launches = 0;
  plan_launches<4>(list, [&](const Meta<4>& m, int64_t) {
    ++launches;
    ASSERT_EQ(m.count, 3);
    EXPECT_TRUE(m.vectorised(0));
    EXPECT_FALSE(m.vectorised(1));
    EXPECT_TRUE(m.vectorised(2));
  });
  EXPECT_EQ(launches, 1);
}

TEST(MultiTensorPlan, AlignmentBitsWorkPastTheFirst32TensorsAndResetBetweenLaunches) {
  const int max = Meta<1>::kMaxTensors;
  TensorList list = aligned_list(max + 3, 10, 1);
  list[40].ptr[0] = at(0x8);
  std::vector<std::vector<bool>> seen;
  plan_launches<1>(list, [&](const Meta<1>& m, int64_t) {
    std::vector<bool> v;
    for (int t = 0; t < m.count; ++t) v.push_back(m.vectorised(t));
    seen.push_back(v);
  });
  ASSERT_EQ(seen.size(), 2u);
  for (int t = 0; t < max; ++t) EXPECT_EQ(seen[0][static_cast<size_t>(t)], t != 40) << t;
  EXPECT_EQ(seen[1], (std::vector<bool>{true, true, true})) << "tensor 40's bit must not carry into the next launch";
}

TEST(MultiTensorPlan, LaunchesCoverEveryChunkOnceInListOrder) {
  const int max = Meta<4>::kMaxTensors;
  TensorList list = aligned_list(2 * max + 1, 1, 4);
  for (size_t i = 0; i < list.size(); ++i) list[i].numel = static_cast<int64_t>(i % 3) * kChunk + 7;
  list[5].numel = 0;  // empty: skipped
  int64_t expected_base = 0, tensors = 0;
  plan_launches<4>(list, [&](const Meta<4>& m, int64_t chunk_base) {
    EXPECT_EQ(chunk_base, expected_base);
    EXPECT_LE(m.count, max);
    EXPECT_EQ(m.chunk_start[0], 0);
    for (int t = 0; t < m.count; ++t) {
      EXPECT_GT(m.numel[t], 0);
      EXPECT_EQ(m.chunk_start[t + 1] - m.chunk_start[t], chunks_of(m.numel[t]));
    }
    expected_base += m.chunk_start[m.count];
    tensors += m.count;
  });
  EXPECT_EQ(tensors, static_cast<int64_t>(list.size()) - 1);
  EXPECT_EQ(expected_base, total_chunks(list));
}

}  // namespace
}  // namespace tandem::optim::mt
