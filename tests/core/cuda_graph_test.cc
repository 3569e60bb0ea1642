// core/cuda_graph.h (capture and replay) and core/allocation_ledger.h (what a
// capture allocated and freed). The GPU tests skip without one
// (TANDEM_REQUIRE_GPU=1 makes them fail); the ledger's own rules run everywhere.
#include "core/cuda_graph.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/allocation_ledger.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/tensor.h"
#include "tests/testing/require_gpu.h"

namespace tandem {
namespace {

TEST(CudaGraph, ReplaysWhatItCapturedReadingMemoryWhenItRuns) {
  TANDEM_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  Tensor x = Tensor::zeros({4}, DType::F32, gpu), y = Tensor::zeros({4}, DType::F32, gpu);
  cuda::Graph g = cuda::Graph::capture(cuda::Stream::create(0), [&] { y.copy_(x); });
  ASSERT_TRUE(g.defined());
  x.fill_(3.0);  // after the capture: the replay copies what x holds then
  g.launch(cuda::current_stream(0));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{3, 3, 3, 3}));
  x.fill_(-1.0);
  g.launch(cuda::current_stream(0));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{-1, -1, -1, -1}));
}

TEST(CudaGraph, MemoryAllocatedInsideACaptureIsCountedAsTheGraphsAndInThePeak) {
  // A replay allocates nothing from the pool: the graph owns what the capture allocated,
  // so a peak that left it out would report a captured step's activations as free.
  TANDEM_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  Tensor y = Tensor::zeros({4}, DType::F32, gpu);
  const size_t before = cuda_memory::stats(0).graphs;
  constexpr int64_t n = int64_t{16} << 20;  // 64 MiB of f32, allocated and freed inside the capture
  cuda::Graph g = cuda::Graph::capture(cuda::Stream::create(0), [&] {
    Tensor scratch = Tensor::empty({n}, DType::F32, gpu);
    scratch.fill_(2.0);
    y.copy_(scratch.view_range(n - 4, {4}));
  });
  const size_t scratch_bytes = static_cast<size_t>(n) * sizeof(float);
  cuda_memory::reset_peak(0);  // the capture itself counted the scratch in the pool's peak
  g.launch(cuda::current_stream(0));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{2, 2, 2, 2}));
  const MemoryStats s = cuda_memory::stats(0);
  EXPECT_GE(s.graphs, before + scratch_bytes);
  EXPECT_LT(s.peak_in_use, scratch_bytes) << "the replay allocated from the pool";
  EXPECT_GE(s.peak_with_graphs(), scratch_bytes) << "the reported peak leaves out the replay's scratch";
}

TEST(CudaGraph, ACallCaptureForbidsFailsTheCaptureAndTheStreamStaysUsable) {
  TANDEM_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  cuda::Stream s = cuda::Stream::create(0);
  Tensor x = Tensor::zeros({4}, DType::F32, gpu), y = Tensor::zeros({4}, DType::F32, gpu);
  // A device-wide synchronisation cannot be part of a graph: it fails instead of running once.
  EXPECT_THROW(cuda::Graph::capture(s,
                                    [&] {
                                      y.copy_(x);
                                      cuda::device_synchronize();
                                    }),
               Error);
  cuda::Graph g = cuda::Graph::capture(s, [&] { y.copy_(x); });
  x.fill_(2.0);
  g.launch(cuda::current_stream(0));
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{2, 2, 2, 2}));
}

TEST(AllocationLedger, TellsMemoryLeftAllocatedFromFreesOfOlderMemory) {
  TANDEM_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  Tensor older = Tensor::empty({256}, DType::F32, gpu);
  cuda_memory::AllocationLedger ledger;
  Tensor kept = Tensor::empty({128}, DType::F32, gpu);
  { Tensor temporary = Tensor::empty({64}, DType::F32, gpu); }
  older = Tensor();
  EXPECT_EQ(ledger.live_bytes(), 128 * sizeof(float));
  EXPECT_EQ(ledger.foreign_frees(), 256 * sizeof(float));
}

TEST(AllocationLedger, CountsOnlyItsOwnThread) {
  TANDEM_REQUIRE_GPU();
  cuda_memory::AllocationLedger ledger;
  Tensor elsewhere;
  std::thread([&] { elsewhere = Tensor::empty({32}, DType::F32, Device::cuda(0)); }).join();
  elsewhere = Tensor();  // freed on this thread, allocated where the ledger does not look: a foreign free
  EXPECT_EQ(ledger.live_bytes(), 0u);
  EXPECT_EQ(ledger.foreign_frees(), 32 * sizeof(float));
}

TEST(AllocationLedger, OneAtATimePerThreadAndHostMemoryIsNotItsConcern) {
  cuda_memory::AllocationLedger ledger;
  EXPECT_THROW(cuda_memory::AllocationLedger second, Error);
  Tensor host = Tensor::empty({1024}, DType::F32);
  EXPECT_EQ(ledger.live_bytes(), 0u);
}

}  // namespace
}  // namespace tandem
