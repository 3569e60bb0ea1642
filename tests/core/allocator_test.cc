#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if TANDEM_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "core/allocator.h"
#include "core/check.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

// The VmFlags of the mapping that holds `p`, from /proc/self/smaps ("" if none does).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (line.find("VmFlags:") == 0) {
      if (inside) return line;
    } else if (range >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
    }
  }
  return "";
}

bool small_pages_asked() {
  const char* v = std::getenv("TANDEM_HOST_HUGE_PAGES");
  return v != nullptr && std::string(v) == "0";
}

// TANDEM_HOST_HUGE_PAGES is read once per process: each value also runs in
// its own ctest entry (core_host_huge_pages, core_host_small_pages).
TEST(HostAllocator, HugePagesPutLargeBlocksOnTwoMiBBoundariesAdvisedForHugePages) {
  if (small_pages_asked()) GTEST_SKIP() << "huge pages are the default; this process runs with TANDEM_HOST_HUGE_PAGES=0";
  if (!host_memory::kernel_has_transparent_huge_pages())
    GTEST_SKIP() << "this kernel has no transparent huge pages: large blocks stay on 4 KiB pages";
  Tensor big = Tensor::empty({(3 << 20) / 4}, DType::F32);  // 3 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % (2 << 20), 0u);
  const std::string flags = vm_flags_of(big.data_ptr());
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;  // "hg": MADV_HUGEPAGE
}

TEST(HostAllocator, SmallPagesOnRequestLeaveLargeBlocksUnadvised) {
  if (!small_pages_asked()) GTEST_SKIP() << "runs under TANDEM_HOST_HUGE_PAGES=0 (ctest core_host_small_pages)";
  Tensor big = Tensor::empty({(3 << 20) / 4}, DType::F32);  // 3 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % 64, 0u);
  EXPECT_FALSE(host_memory::large_blocks_on_huge_pages());
  const std::string flags = vm_flags_of(big.data_ptr());
  EXPECT_EQ(flags.find(" hg"), std::string::npos) << flags;
}

TEST(HostAllocator, TracksBytesInUseAndPeak) {
  host_memory::reset_peak();
  size_t base = host_memory::stats().in_use;
  {
    Tensor a = Tensor::empty({1000}, DType::F32);
    EXPECT_EQ(host_memory::stats().in_use, base + 4000);
    { Tensor b = Tensor::empty({500}, DType::F64); }
    EXPECT_EQ(host_memory::stats().in_use, base + 4000);
    EXPECT_GE(host_memory::stats().peak_in_use, base + 8000);
  }
  EXPECT_EQ(host_memory::stats().in_use, base);
}

TEST(HostAllocator, HandsAFreedLargeBlockToTheNextRequestOfItsSizeClass) {
  if (!host_memory::caches_freed_blocks()) GTEST_SKIP() << "AddressSanitizer build: freed blocks go back at once";
  host_memory::release_cached();
  void* first = nullptr;
  size_t reserved = 0;
  {
    Tensor a = Tensor::empty({1 << 20}, DType::F32);  // 4 MiB
    first = a.data_ptr();
    reserved = host_memory::stats().reserved;
  }
  EXPECT_EQ(host_memory::stats().reserved, reserved) << "the freed block stays cached";
  Tensor b = Tensor::empty({(1 << 20) - 100}, DType::F32);  // same class: at most 1/8 apart
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(host_memory::stats().reserved, reserved);
}

TEST(HostAllocator, ReleaseCachedGivesEveryCachedBlockBack) {
  host_memory::release_cached();
  const size_t before = host_memory::stats().reserved;
  { Tensor a = Tensor::empty({1 << 20}, DType::F32); }
  if (host_memory::caches_freed_blocks()) {
    EXPECT_GE(host_memory::stats().reserved, before + (4u << 20));
  }
  host_memory::release_cached();
  EXPECT_EQ(host_memory::stats().reserved, before);
}

TEST(HostAllocator, GivesSmallBlocksBackAtOnce) {
  host_memory::release_cached();
  const size_t before = host_memory::stats().reserved;
  { Tensor a = Tensor::empty({16 << 10}, DType::F32); }  // 64 KiB: glibc's arenas reuse it
  EXPECT_EQ(host_memory::stats().reserved, before);
}

TEST(HostAllocator, UnderAddressSanitizerGivesEveryFreedBlockBack) {
  if (host_memory::caches_freed_blocks()) GTEST_SKIP() << "only AddressSanitizer builds give large blocks back at once";
  const size_t before = host_memory::stats().reserved;
  { Tensor a = Tensor::empty({1 << 20}, DType::F32); }
  EXPECT_EQ(host_memory::stats().reserved, before);
}

TEST(HostAllocator, ThreadsFreeingEachOthersBlocksKeepTheBooksBalanced) {
  // Loader and comm threads free tensors that other threads allocated: every
  // byte handed out comes back, and after release_cached the allocator holds
  // what it held before.
  host_memory::release_cached();
  const MemoryStats before = host_memory::stats();
  std::vector<std::thread> threads;
  std::vector<std::vector<Tensor>> made(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &made] {
      for (int i = 0; i < 200; ++i) {
        made[static_cast<size_t>(t)].push_back(Tensor::empty({(32 << 10) * (1 + (i * 7 + t) % 24)}, DType::F32));
        if (i % 3 == 2) made[static_cast<size_t>(t)].erase(made[static_cast<size_t>(t)].begin());
      }
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  for (int t = 0; t < 4; ++t) threads.emplace_back([t, &made] { made[static_cast<size_t>((t + 1) % 4)].clear(); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(host_memory::stats().in_use, before.in_use);
  host_memory::release_cached();
  EXPECT_EQ(host_memory::stats().reserved, before.reserved);
}

TEST(HostAllocator, ZeroBytesNeedNoMemory) {
  Tensor t = Tensor::empty({0});
  EXPECT_EQ(t.numel(), 0);
}

// Rounded up to a block, such a count used to wrap around to a small block.
TEST(HostAllocator, MoreBytesThanAnyAllocationCanHoldIsAnError) {
  EXPECT_THROW(host_memory::allocate(SIZE_MAX - 8), Error);
  EXPECT_THROW(host_memory::allocate(size_t{1} << 63), Error);
}

TEST(PinnedAllocator, FallsBackToOrdinaryMemoryWithoutAGpu) {
  Tensor t = Tensor::empty({16}, DType::F32, Device::cpu(), /*pinned=*/true);
  EXPECT_EQ(t.storage()->pinned(), cuda::available());
  t.fill_(1);
  EXPECT_EQ(t.to_double_vector()[15], 1.0);
}

TEST(CudaAllocator, SteadyStateLoopReservesNoNewMemory) {
  TANDEM_REQUIRE_GPU();
  auto step = [] {
    Tensor a = Tensor::empty({1 << 20}, DType::F32, Device::cuda(0));
    Tensor b = Tensor::empty({3 << 18}, DType::F16, Device::cuda(0));
    a.fill_(1);
    b.fill_(2);
  };
  step();
  cuda::device_synchronize();
  size_t reserved = cuda_memory::stats(0).reserved;
  uint64_t allocations = cuda_memory::stats(0).allocations;
  for (int i = 0; i < 200; ++i) step();
  cuda::device_synchronize();
  EXPECT_EQ(cuda_memory::stats(0).reserved, reserved) << "the pool grew: memory is not being reused";
  EXPECT_EQ(cuda_memory::stats(0).allocations, allocations + 400);
}

TEST(CudaAllocator, ReportsBytesInUseAndPeak) {
  TANDEM_REQUIRE_GPU();
  cuda_memory::reset_peak(0);
  size_t base = cuda_memory::stats(0).in_use;
  {
    Tensor a = Tensor::empty({1 << 20}, DType::F32, Device::cuda(0));
    EXPECT_EQ(cuda_memory::stats(0).in_use, base + (4u << 20));
  }
  EXPECT_EQ(cuda_memory::stats(0).in_use, base);
  EXPECT_GE(cuda_memory::stats(0).peak_in_use, base + (4u << 20));
}

TEST(CudaAllocator, OutOfMemoryIsAnErrorNotACrash) {
  TANDEM_REQUIRE_GPU();
  EXPECT_THROW(Tensor::empty({int64_t{1} << 50}, DType::U8, Device::cuda(0)), Error);
  Tensor ok = Tensor::zeros({4}, DType::F32, Device::cuda(0));  // the device is still usable
  EXPECT_EQ(ok.to_double_vector()[0], 0.0);
}

TEST(CudaAllocator, CachedBlocksAreGivenBackBeforeALargerAllocationFails) {
  TANDEM_REQUIRE_GPU();
#if TANDEM_WITH_CUDA
  cuda_memory::release_cached(0);
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  // Four fifths of the free memory in 256 MiB blocks, freed: the pool keeps them.
  const size_t block = size_t{256} << 20, want = free_bytes / 5 * 4;
  {
    std::vector<Tensor> blocks;
    for (size_t got = 0; got + block <= want; got += block)
      blocks.push_back(Tensor::empty({static_cast<int64_t>(block)}, DType::U8, Device::cuda(0)));
  }
  cuda::device_synchronize();
  ASSERT_GE(cuda_memory::stats(0).reserved, want - block) << "the pool was expected to keep the freed blocks";
  // One allocation larger than any cached block and than what is left outside the pool.
  Tensor big = Tensor::empty({static_cast<int64_t>(want)}, DType::U8, Device::cuda(0));
  EXPECT_EQ(big.nbytes(), want);
#endif
}

}  // namespace
}  // namespace tandem
