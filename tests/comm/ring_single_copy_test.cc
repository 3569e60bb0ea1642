// The ring's single-copy all_reduce (comm/single_copy.h) in whole groups whose
// ranks are threads of one process (one host, one pid: process_vm_readv
// reads the process's own memory): results bitwise equal to the ring's for
// every dtype, op and size, views at odd offsets, buffers rewritten right
// after the op returns, the size threshold, the probe's fallback, and reads
// that fail mid-collective. The multi-process runs (real pids, a killed rank)
// are in ring_multiprocess_test.cc.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <future>
#include <thread>

#include "comm/ring_process_group.h"
#include "comm/single_copy.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/allocator.h"
#include "core/check.h"
#include "tests/comm/ring_testing.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;

using Groups = testing::RingGroups;
using testing::expect_every_rank_fails_to_start;
using testing::all_reduce_results;
using testing::bytes_of;
using testing::noisy;
using testing::on_every_rank;
using testing::start_ring;

long system_read(int pid, void* local, uint64_t remote, size_t bytes) {
  iovec l{local, bytes}, r{reinterpret_cast<void*>(remote), bytes};
  return ::process_vm_readv(pid, &l, 1, &r, 1, 0);
}

ProcessGroupOptions options(RingSingleCopy mode, const std::string& group, CrossMemoryRead read = {}) {
  ProcessGroupOptions o;
  o.timeout = 30000ms;
  o.group_name = group;
  o.ring_transport = RingTransport::Shm;
  o.ring_single_copy = mode;
  o.ring_cross_memory_read = std::move(read);
  return o;
}


// Single copy reads ordinary tensors.
Tensor ordinary(const ProcessGroup&, const std::vector<double>& values, DType d) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, d);
}

class SingleCopyGroups : public ::testing::TestWithParam<int> {};

TEST_P(SingleCopyGroups, AllReduceEqualsTheRingBitForBitForEveryDtypeOpAndSize) {
  const int n = GetParam();
  StoreServer server({});
  auto single = start_ring(server, n, [](int) { return options(RingSingleCopy::On, "single"); });
  auto ring = start_ring(server, n, [](int) { return options(RingSingleCopy::Off, "ring"); });
  ASSERT_EQ(single[0]->single_copy(), "from 0 bytes");
  ASSERT_EQ(ring[0]->single_copy(), "off: asked for");
  int salt = 0;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::F64}) {
    const auto esz = static_cast<int64_t>(dtype_size(d));
    // Empty, fewer elements than ranks, not divisible by the world size, and
    // segments of several pieces with a partial last one.
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{7}, int64_t{1001},
                          static_cast<int64_t>(kSingleCopyPieceBytes) / esz * n * 2 + 5}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        salt += 2;
        auto a = all_reduce_results(single, d, count, op, salt, ordinary), b = all_reduce_results(ring, d, count, op, salt, ordinary);
        ASSERT_EQ(a, b) << dtype_name(d) << " x" << count << " " << reduce_op_name(op);
      }
    }
  }
}

TEST_P(SingleCopyGroups, ViewsAtDifferentOddOffsetsIntoLargerStoragesReduceAndLeaveTheRestAlone) {
  const int n = GetParam();
  StoreServer server({});
  auto pgs = start_ring(server, n, [](int) { return options(RingSingleCopy::On, "single"); });
  for (DType d : {DType::F16, DType::F32, DType::F64}) {
    const int64_t count = 100003;
    std::vector<Tensor> storage, views;
    for (int r = 0; r < n; ++r) {
      // Rank r's view starts 2r+1 elements in: every rank at another, odd, element offset.
      storage.push_back(Tensor::full({count + 2 * n + 2}, -7.0, d));
      views.push_back(storage.back().view_range(2 * r + 1, {count}));
      views.back().copy_(Tensor::from_vector(noisy(r, count, d, 3), {count}, d));
    }
    on_every_rank(n, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(views[static_cast<size_t>(r)], ReduceOp::Sum); });
    std::vector<double> want(static_cast<size_t>(count));
    for (int r = 0; r < n; ++r) {
      auto v = Tensor::from_vector(noisy(r, count, d, 3), {count}, d).to_double_vector();
      for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    }
    for (int r = 0; r < n; ++r) {
      auto got = storage[static_cast<size_t>(r)].to_double_vector();
      const int64_t first = 2 * r + 1;
      for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
        if (i < first || i >= first + count) {
          ASSERT_EQ(got[static_cast<size_t>(i)], -7.0) << dtype_name(d) << " rank " << r << " outside the view at " << i;
        } else {
          const double w = want[static_cast<size_t>(i - first)];
          ASSERT_NEAR(got[static_cast<size_t>(i)], w, (d == DType::F16 ? 4e-3 : 1e-5) * n * (1 + std::abs(w)))
              << dtype_name(d) << " rank " << r << " element " << i - first;
        }
      }
    }
  }
}

TEST_P(SingleCopyGroups, ABufferRewrittenAsSoonAsItsAllReduceReturnsDoesNotReachASlowPeer) {
  // Rank 1 reads slowly (every read waits 20 ms first): without the barrier
  // between the halves the others would copy its segment before it is
  // reduced, and without the final one rank 0 would return, overwrite its
  // buffer, and rank 1 would still copy rank 0's segment from it.
  const int n = GetParam();
  StoreServer server({});
  auto pgs = start_ring(server, n, [](int r) {
    CrossMemoryRead read = system_read;
    if (r == 1)
      read = [](int pid, void* local, uint64_t remote, size_t bytes) {
        std::this_thread::sleep_for(20ms);
        return system_read(pid, local, remote, bytes);
      };
    return options(RingSingleCopy::On, "slow", read);
  });
  const int64_t count = (1 << 20) + 3;
  std::vector<Tensor> t;
  for (int r = 0; r < n; ++r) t.push_back(Tensor::from_vector(noisy(r, count, DType::F32, 5), {count}, DType::F32));
  std::vector<std::future<std::vector<char>>> results;
  for (int r = 0; r < n; ++r) {
    auto work = pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum);
    results.push_back(std::async(std::launch::async, [&t, work, r] {
      EXPECT_TRUE(work->wait(60000ms));
      std::vector<char> got = bytes_of(t[static_cast<size_t>(r)]);
      t[static_cast<size_t>(r)].fill_(1e30);  // the caller owns the buffer again
      return got;
    }));
  }
  std::vector<std::vector<char>> got;
  for (auto& f : results) got.push_back(f.get());
  // The reference: the same sums through the ring.
  auto ring = start_ring(server, n, [](int) { return options(RingSingleCopy::Off, "ring"); });
  std::vector<Tensor> want;
  for (int r = 0; r < n; ++r) want.push_back(Tensor::from_vector(noisy(r, count, DType::F32, 5), {count}, DType::F32));
  on_every_rank(n, [&](int r) { return ring[static_cast<size_t>(r)]->all_reduce(want[static_cast<size_t>(r)], ReduceOp::Sum); });
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], bytes_of(want[static_cast<size_t>(r)])) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SingleCopyGroups, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(SingleCopyChoice, AutoKeepsTheRingWhenHostTensorsAreOnSmallPages) {
  if (host_memory::large_blocks_on_huge_pages()) GTEST_SKIP() << "runs under TANDEM_HOST_HUGE_PAGES=0 (ctest comm_single_copy_auto_small_pages)";
  std::atomic<int> reads{0};
  CrossMemoryRead counted = [&](int pid, void* local, uint64_t remote, size_t bytes) {
    ++reads;
    return system_read(pid, local, remote, bytes);
  };
  StoreServer server({});
  auto pgs = start_ring(server, 2, [&](int) { return options(RingSingleCopy::Auto, "small_pages", counted); });
  EXPECT_EQ(pgs[0]->single_copy(), "off: host tensors are not on huge pages on every rank (TANDEM_HOST_HUGE_PAGES=0 or a "
                                   "kernel without transparent huge pages; from 4 KiB pages single copy is slower than "
                                   "the ring)");
  const int after_probe = reads.load();
  EXPECT_GT(after_probe, 0) << "the probe still runs, so that its failure is what gets reported";
  std::vector<Tensor> t = {Tensor::full({4 << 20}, 1.0), Tensor::full({4 << 20}, 2.0)};
  on_every_rank(2, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum); });
  EXPECT_EQ(t[0].to_double_vector(), std::vector<double>(4 << 20, 3.0));
  EXPECT_EQ(reads.load(), after_probe);
}

// Huge pages are the default; its own ctest entry (comm_single_copy_auto_huge_pages) fails where it skips
// on a kernel with transparent huge pages.
TEST(SingleCopyChoice, AutoOnHugePagesReadsPeersOnlyFromTheThresholdAndSmallerMessagesKeepTheRing) {
  if (!host_memory::large_blocks_on_huge_pages()) GTEST_SKIP() << "needs huge pages: not TANDEM_HOST_HUGE_PAGES=0, a kernel with them";
  std::atomic<int> reads{0};
  CrossMemoryRead counted = [&](int pid, void* local, uint64_t remote, size_t bytes) {
    ++reads;
    return system_read(pid, local, remote, bytes);
  };
  StoreServer server({});
  auto pgs = start_ring(server, 2, [&](int) { return options(RingSingleCopy::Auto, "auto", counted); });
  ASSERT_EQ(pgs[0]->single_copy(), fmt::format("from {} bytes", kRingSingleCopyMinBytes));
  auto reduce = [&](int64_t count) {
    std::vector<Tensor> t = {Tensor::full({count}, 1.0), Tensor::full({count}, 2.0)};
    on_every_rank(2, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum); });
    EXPECT_EQ(t[0].to_double_vector(), std::vector<double>(static_cast<size_t>(count), 3.0));
  };
  const int before = reads.load();  // the probe's
  reduce(static_cast<int64_t>(kRingSingleCopyMinBytes / 4) - 1);
  EXPECT_EQ(reads.load(), before);
  reduce(static_cast<int64_t>(kRingSingleCopyMinBytes / 4));
  EXPECT_GT(reads.load(), before);
}

TEST(SingleCopyChoice, AProbeRefusedWithEpermOrEnosysFallsBackToTheRingAndSaysWhy) {
  for (int error : {EPERM, ENOSYS}) {
    std::atomic<int> reads{0};
    StoreServer server({});
    // Only rank 1 is refused: every rank must still make the same choice.
    auto pgs = start_ring(server, 3, [&](int r) {
      CrossMemoryRead read = system_read;
      if (r == 1)
        read = [&reads, error](int, void*, uint64_t, size_t) -> long {
          ++reads;
          errno = error;
          return -1;
        };
      return options(RingSingleCopy::Auto, "refused", read);
    });
    for (int r = 0; r < 3; ++r) {
      const std::string note = pgs[static_cast<size_t>(r)]->single_copy();
      EXPECT_EQ(note.rfind("off: rank 1 cannot read the memory of rank 2: process_vm_readv from pid ", 0), 0u) << note;
      EXPECT_NE(note.find(error == EPERM ? "(EPERM)" : "(ENOSYS)"), std::string::npos) << note;
    }
    const int after_probe = reads.load();
    const int64_t count = 1 << 20;  // 4 MiB: above the threshold
    std::vector<Tensor> t;
    for (int r = 0; r < 3; ++r) t.push_back(Tensor::full({count}, r + 1.0));
    on_every_rank(3, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum); });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(t[static_cast<size_t>(r)].to_double_vector(), std::vector<double>(count, 6.0));
    EXPECT_EQ(reads.load(), after_probe);
  }
}

TEST(SingleCopyChoice, TheFallbackIsLoggedOncePerRankUnderDebugInfo) {
  ::setenv("TANDEM_DISTRIBUTED_DEBUG", "INFO", 1);
  ::testing::internal::CaptureStderr();
  {
    StoreServer server({});
    auto pgs = start_ring(server, 2, [](int) {
      return options(RingSingleCopy::Auto, "logged", [](int, void*, uint64_t, size_t) -> long {
        errno = EPERM;
        return -1;
      });
    });
    std::vector<Tensor> t = {Tensor::full({1 << 20}, 1.0), Tensor::full({1 << 20}, 2.0)};
    for (int i = 0; i < 3; ++i)
      on_every_rank(2, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum); });
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("TANDEM_DISTRIBUTED_DEBUG");
  for (int r = 0; r < 2; ++r) {
    const std::string line = fmt::format("tandem: ring group 'logged' rank {}: all_reduce stays on the ring, single "
                                         "copy is off: rank 0 cannot read the memory of rank 1: process_vm_readv from pid ",
                                         r);
    const size_t at = err.find(line);
    EXPECT_NE(at, std::string::npos) << err;
    EXPECT_EQ(err.find(line, at + 1), std::string::npos) << "logged more than once:\n" << err;
  }
}

TEST(SingleCopyChoice, OnFailsOnEveryRankWhenAProbeIsRefused) {
  StoreServer server({});
  CrossMemoryRead refused = [](int, void*, uint64_t, size_t) -> long {
    errno = EPERM;
    return -1;
  };
  expect_every_rank_fails_to_start(
      server, 2, [&](int r) { return options(RingSingleCopy::On, "on", r == 0 ? refused : CrossMemoryRead{}); },
      [](const std::string& m) {
        EXPECT_NE(m.find("ring single copy 'on': rank 0 cannot read the memory of rank 1: process_vm_readv from pid "),
                  std::string::npos)
            << m;
      });
}

TEST(SingleCopyChoice, DifferentModesOnTwoRanksFailNamingBoth) {
  StoreServer server({});
  expect_every_rank_fails_to_start(
      server, 2, [](int r) { return options(r == 0 ? RingSingleCopy::On : RingSingleCopy::Off, "modes"); },
      [](const std::string& m) {
        EXPECT_TRUE(m.find("ring single copy: rank 0 asks for 'on' and rank 1 for 'off'") != std::string::npos ||
                    m.find("ring single copy: rank 1 asks for 'off' and rank 0 for 'on'") != std::string::npos)
            << m;
      });
}

TEST(SingleCopyChoice, AnUnknownModeIsAnErrorNamingWhereItCameFrom) {
  try {
    parse_ring_single_copy("maybe", "TANDEM_RING_SINGLE_COPY");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_RING_SINGLE_COPY: 'maybe' is not a ring single-copy mode (auto, off, on)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SingleCopyFailures, ADifferentElementCountFailsEveryRankNamingThePeerAndBothCounts) {
  // The long timeout: the error must come from the exchanged counts, not from waiting.
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) {
    ProcessGroupOptions o = options(RingSingleCopy::On, "count");
    o.timeout = 60000ms;
    return o;
  });
  std::vector<Tensor> t = {Tensor::full({100}, 1.0), Tensor::full({99}, 1.0)};
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < 2; ++r) works.push_back(pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum));
  for (int r = 0; r < 2; ++r) {
    try {
      works[static_cast<size_t>(r)]->wait(60000ms);
      ADD_FAILURE() << "rank " << r << ": expected an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("all_reduce #0 on rank 0: rank 1 all-reduces 99 elements where this rank has 100") !=
                      std::string::npos ||
                  m.find("all_reduce #0 on rank 1: rank 0 all-reduces 100 elements where this rank has 99") !=
                      std::string::npos)
          << "rank " << r << ": " << m;
    }
  }
}

TEST(SingleCopyFailures, APeerThatVanishesMidCollectiveFailsEveryRankNamingIt) {
  // Rank 0's reads find rank 1 gone (ESRCH, as for a killed process) once the probe has passed.
  std::atomic<bool> probed{false};
  StoreServer server({});
  auto pgs = start_ring(server, 3, [&](int r) {
    CrossMemoryRead read = system_read;
    if (r == 0)
      read = [&probed](int pid, void* local, uint64_t remote, size_t bytes) -> long {
        if (!probed) return system_read(pid, local, remote, bytes);
        errno = ESRCH;
        return -1;
      };
    return options(RingSingleCopy::On, "vanish", read);
  });
  probed = true;
  std::vector<Tensor> t;
  for (int r = 0; r < 3; ++r) t.push_back(Tensor::full({1 << 20}, 1.0));
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < 3; ++r) works.push_back(pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum));
  for (int r = 0; r < 3; ++r) {
    try {
      works[static_cast<size_t>(r)]->wait(60000ms);
      ADD_FAILURE() << "rank " << r << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce #0 on rank 0: rank 1 (pid "), std::string::npos)
          << "rank " << r << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(") is gone (the process exited or was killed): process_vm_readv of "),
                std::string::npos)
          << "rank " << r << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem::comm
