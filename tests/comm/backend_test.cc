// Backend choice and the nccl backend at world size 1 (GPU tests skip
// without a GPU; multi-rank GPU coverage uses the ring backend, see
// ring_multiprocess_test.cc).
#include <gtest/gtest.h>

#include "comm/init.h"
#include "core/check.h"
#include "core/stream.h"
#include "tests/testing/gradcheck.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;

ProcessGroupOptions quick() {
  ProcessGroupOptions o;
  o.timeout = 20000ms;
  return o;
}

TEST(Backends, AutoPicksNcclOnlyWhenEveryRankHasAGpuOfItsOwn) {
  EXPECT_EQ(choose_backend({"GPU-a", "GPU-b"}), "nccl");
  EXPECT_EQ(choose_backend({"GPU-a"}), "nccl");
  EXPECT_EQ(choose_backend({"GPU-a", "GPU-a"}), "ring");  // two ranks on one GPU: NCCL refuses that
  EXPECT_EQ(choose_backend({"GPU-a", ""}), "ring");       // a rank without a GPU or without NCCL
}

TEST(Backends, AutoAtWorldSizeOneFollowsThisMachine) {
  auto pg = init_process_group("auto", RankInfo{}, quick());
  EXPECT_EQ(pg->backend_name(), !nccl_version().empty() && cuda::available() ? "nccl" : "ring");
}

TEST(Backends, ARankUsesItsLocalRankModuloTheVisibleGpus) {
  EXPECT_EQ(device_for_local_rank(3, 4), 3);  // one node-wide list: GPU = local rank
  EXPECT_EQ(device_for_local_rank(3, 1), 0);  // one visible GPU per rank (SLURM --gpus-per-task)
  EXPECT_EQ(device_for_local_rank(5, 2), 1);  // more ranks than GPUs: shared, round robin
  EXPECT_EQ(device_for_local_rank(0, 0), -1);
}

TEST(Backends, AnUnknownBackendIsNamedInTheError) {
  try {
    init_process_group("mpi", RankInfo{}, quick());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown process group backend 'mpi'"), std::string::npos) << e.what();
  }
}

#if !TANDEM_WITH_NCCL
TEST(Backends, NcclInABuildWithoutItIsAClearError) {
  try {
    init_process_group("nccl", RankInfo{}, quick());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cuda::built_with_cuda() ? "built without NCCL" : "built without CUDA"), std::string::npos) << m;
    EXPECT_NE(m.find("use 'ring'"), std::string::npos) << m;
  }
}
#else
// The nccl tests below need a GPU; this one needs only the library.
TEST(Backends, TheNcclLibraryReportsItsVersion) { EXPECT_NE(nccl_version().find('.'), std::string::npos); }
#endif

#if TANDEM_WITH_NCCL
TEST(NcclBackend, EveryOpRunsOnTheCurrentStreamAndStampsItsWork) {
  TANDEM_REQUIRE_GPU();
  auto pg = init_process_group("nccl", RankInfo{}, quick());
  ASSERT_EQ(pg->backend_name(), "nccl");
  cuda::Stream s = cuda::Stream::create(0);
  cuda::StreamGuard guard(s);
  Tensor t = Tensor::from_vector(std::vector<double>{1, -2, 3}, {3}, DType::F32, Device::cuda(0));
  auto w = pg->all_reduce(t, ReduceOp::Avg);
  ASSERT_TRUE(w->wait(20000ms));
  EXPECT_LE(w->start_time(), w->end_time());
  EXPECT_NE(w->start_time(), Work::Clock::time_point{});
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, -2, 3}));
  Tensor out = Tensor::zeros({3}, DType::F32, Device::cuda(0));
  ASSERT_TRUE(pg->all_gather(t, out)->wait(20000ms));
  EXPECT_EQ(out.to_double_vector(), (std::vector<double>{1, -2, 3}));
  Tensor part = Tensor::zeros({3}, DType::F32, Device::cuda(0));
  ASSERT_TRUE(pg->reduce_scatter(out, part, ReduceOp::Max)->wait(20000ms));
  EXPECT_EQ(part.to_double_vector(), (std::vector<double>{1, -2, 3}));
  Tensor h = Tensor::from_vector(std::vector<double>{0.5, 1.5}, {2}, DType::BF16, Device::cuda(0));
  ASSERT_TRUE(pg->broadcast(h, 0)->wait(20000ms));
  EXPECT_EQ(h.to_double_vector(), (std::vector<double>{0.5, 1.5}));
  ASSERT_TRUE(pg->barrier()->wait(20000ms));
}

TEST(NcclBackend, CompletesDeviceOpsOnTheStream) {
  TANDEM_REQUIRE_GPU();
  auto pg = init_process_group("nccl", RankInfo{}, quick());
  EXPECT_EQ(pg->device_completion(), DeviceCompletion::OnStream);
}

TEST(NcclBackend, CpuTensorsAreRejected) {
  TANDEM_REQUIRE_GPU();
  auto pg = init_process_group("nccl", RankInfo{}, quick());
  Tensor t = Tensor::zeros({3});
  EXPECT_THROW(pg->all_reduce(t, ReduceOp::Sum), Error);
}

#endif  // TANDEM_WITH_NCCL

TEST(RingBackend, CompletesDeviceOpsOnTheHost) {
  // What DDP's Reducer reads to decide whether it must wait on the host before
  // its device work may use a reduced bucket (comm/process_group.h).
  auto pg = init_process_group("ring", RankInfo{}, quick());
  EXPECT_EQ(pg->device_completion(), DeviceCompletion::OnHost);
}

TEST(RingBackend, CudaTensorsAreStagedThroughHostMemory) {
  TANDEM_REQUIRE_GPU();
  auto pg = init_process_group("ring", RankInfo{}, quick());
  Tensor in = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {4}, DType::F16, Device::cuda(0));
  Tensor out = Tensor::zeros({4}, DType::F16, Device::cuda(0));
  ASSERT_TRUE(pg->all_reduce(in, out, ReduceOp::Sum)->wait(20000ms));
  EXPECT_EQ(out.to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace tandem::comm
