// Shared buffers (comm/shared_buffers.h) and the ring's all_reduce that
// reduces them in place, in groups whose ranks are threads of one process
// (one pid: a rank maps its peers' segments through /proc/self/fd): the
// segments' books, results bitwise equal to the ring's for every dtype, op
// and size, views into a larger buffer (DDP's buckets), the choice and its
// errors, and ranks that disagree. Real processes, and a rank killed
// mid-collective, are in ring_multiprocess_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <future>

#include "comm/ring_process_group.h"
#include "comm/shared_buffers.h"
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

ProcessGroupOptions options(RingSharedBuffers mode, const std::string& group,
                            RingTransport transport = RingTransport::Shm) {
  ProcessGroupOptions o;
  o.timeout = 30000ms;
  o.group_name = group;
  o.ring_transport = transport;
  o.ring_single_copy = RingSingleCopy::Off;  // what is not shared goes round the ring
  o.ring_shared_buffers = mode;
  return o;
}

// `values` in a tensor from the group's shared_zeros.
Tensor buffer_of(const ProcessGroup& pg, const std::vector<double>& values, DType d) {
  const auto count = static_cast<int64_t>(values.size());
  Tensor t = pg.shared_zeros({count}, d, Device::cpu());
  t.copy_(Tensor::from_vector(values, {count}, d));
  return t;
}


TEST(SharedBuffers, ZerosLieInASegmentOfTheirOwnThatIsForgottenWithTheTensor) {
  std::optional<SharedLocation> before;
  {
    Tensor t = shared_zeros({1000}, DType::F32);
    EXPECT_EQ(t.to_double_vector(), std::vector<double>(1000, 0.0));
    const auto at = find_shared(static_cast<const char*>(t.data_ptr()) + 40, 400);
    ASSERT_TRUE(at.has_value());
    EXPECT_EQ(at->offset, 40u);
    EXPECT_GE(at->bytes, 4000u);
    EXPECT_FALSE(find_shared(t.data_ptr(), at->bytes + 1).has_value()) << "a range past the segment's end";
    before = find_shared(t.data_ptr(), 4);
  }
  Tensor plain = Tensor::zeros({1000});
  EXPECT_FALSE(find_shared(plain.data_ptr(), 4).has_value());
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(::fcntl(before->fd, F_GETFD), -1) << "the segment's fd is closed with its last tensor";
}

TEST(SharedBuffers, CountInTheHostMemoryStatsWhileTheyLive) {
  const MemoryStats before = host_memory::stats();
  {
    Tensor t = shared_zeros({1 << 20}, DType::F32);
    const MemoryStats during = host_memory::stats();
    EXPECT_EQ(during.in_use, before.in_use + (4u << 20));
    EXPECT_EQ(during.reserved, before.reserved + (4u << 20));
    EXPECT_GE(during.peak_in_use, during.in_use);
  }
  EXPECT_EQ(host_memory::stats().in_use, before.in_use);
  EXPECT_EQ(host_memory::stats().reserved, before.reserved);
}

TEST(SharedBuffers, APeerMappingSeesTheOwnersWritesAndTheOwnerSeesThePeers) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  Tensor t = shared_zeros({16}, DType::I64);
  PeerSegments peers;
  auto* mapped = reinterpret_cast<int64_t*>(peers.map(3, static_cast<int>(::getpid()), *find_shared(t.data_ptr(), 128), "test"));
  ASSERT_NE(static_cast<void*>(mapped), t.data_ptr()) << "a second mapping, as a peer process would have";
  t.data<int64_t>()[5] = 42;
  EXPECT_EQ(mapped[5], 42);
  mapped[7] = -9;
  EXPECT_EQ(t.data<int64_t>()[7], -9);
  EXPECT_EQ(peers.map(3, static_cast<int>(::getpid()), *find_shared(t.data_ptr(), 128), "test"),
            reinterpret_cast<char*>(mapped))
      << "a second op on the same buffer reuses the mapping";
  EXPECT_EQ(peers.mapped(), 1u);
}

TEST(SharedBuffers, AFreedBufferWhoseFdNumberComesBackIsUnmappedForTheNewOne) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  PeerSegments peers;
  const int pid = static_cast<int>(::getpid());
  SharedLocation first;
  {
    Tensor a = shared_zeros({16}, DType::F32);
    first = *find_shared(a.data_ptr(), 4);
    peers.map(1, pid, first, "test");
  }
  Tensor b = shared_zeros({16}, DType::F32);
  const SharedLocation second = *find_shared(b.data_ptr(), 4);
  ASSERT_EQ(second.fd, first.fd) << "the kernel hands out the lowest free fd number";
  ASSERT_NE(second.inode, first.inode);
  peers.map(1, pid, second, "test");
  EXPECT_EQ(peers.mapped(), 1u);
}

TEST(SharedBuffers, MappingABufferThatIsGoneFailsNamingTheRank) {
  PeerSegments peers;
  SharedLocation gone;
  {
    Tensor a = shared_zeros({16}, DType::F32);
    gone = *find_shared(a.data_ptr(), 4);
  }
  try {
    peers.map(2, static_cast<int>(::getpid()), gone, "all_reduce #4 on rank 0");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("all_reduce #4 on rank 0: "), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2 (pid "), std::string::npos) << m;
    EXPECT_NE(m.find("shared buffer /proc/"), std::string::npos) << m;
  }
}

class SharedBufferGroups : public ::testing::TestWithParam<int> {};

TEST_P(SharedBufferGroups, AllReduceEqualsTheRingBitForBitForEveryDtypeOpAndSize) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  const int n = GetParam();
  StoreServer server({});
  auto shared = start_ring(server, n, [](int) { return options(RingSharedBuffers::On, "shared"); });
  auto ring = start_ring(server, n, [](int) { return options(RingSharedBuffers::Off, "ring"); });
  ASSERT_EQ(shared[0]->shared_buffers(), "from 0 bytes");
  ASSERT_EQ(ring[0]->shared_buffers(), "off: asked for");
  ASSERT_FALSE(find_shared(ring[0]->shared_zeros({4}, DType::F32, Device::cpu()).data_ptr(), 4).has_value())
      << "with shared buffers off the group hands out ordinary tensors";
  int salt = 0;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::F64}) {
    const auto esz = static_cast<int64_t>(dtype_size(d));
    // Empty, fewer elements than ranks, not divisible by the world size, and
    // segments of several pieces with a partial last one.
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{7}, int64_t{1001},
                          static_cast<int64_t>(kSharedPieceBytes) / esz * n * 2 + 5}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        salt += 2;
        auto a = all_reduce_results(shared, d, count, op, salt, buffer_of),
             b = all_reduce_results(ring, d, count, op, salt, buffer_of);
        ASSERT_EQ(a, b) << dtype_name(d) << " x" << count << " " << reduce_op_name(op);
      }
    }
  }
}

TEST_P(SharedBufferGroups, ViewsAtDifferentOffsetsIntoOneBufferReduceAndLeaveTheRestAlone) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  // DDP reduces whole buckets; a comm hook may reduce a part of one.
  const int n = GetParam();
  StoreServer server({});
  auto pgs = start_ring(server, n, [](int) { return options(RingSharedBuffers::On, "views"); });
  const int64_t count = 3001, total = 4000;
  std::vector<Tensor> whole, views;
  for (int r = 0; r < n; ++r) {
    whole.push_back(buffer_of(*pgs[static_cast<size_t>(r)], std::vector<double>(total, -1.0), DType::F32));
    views.push_back(whole.back().narrow(11 * (r + 1), count));
    views.back().copy_(Tensor::from_vector(noisy(r, count, DType::F32, 5), {count}, DType::F32));
  }
  on_every_rank(n, [&](int r) { return pgs[static_cast<size_t>(r)]->all_reduce(views[static_cast<size_t>(r)], ReduceOp::Sum); });
  std::vector<double> want(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const auto v = noisy(r, count, DType::F32, 5);
    for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] += static_cast<float>(v[static_cast<size_t>(i)]);
  }
  for (int r = 0; r < n; ++r) {
    const std::vector<double> got = whole[static_cast<size_t>(r)].to_double_vector();
    const int64_t at = 11 * (r + 1);
    for (int64_t i = 0; i < total; ++i) {
      if (i >= at && i < at + count)
        ASSERT_NEAR(got[static_cast<size_t>(i)], want[static_cast<size_t>(i - at)], 1e-4) << "rank " << r << " @" << i;
      else
        ASSERT_EQ(got[static_cast<size_t>(i)], -1.0) << "rank " << r << " @" << i << " lies outside the view";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedBufferGroups, ::testing::Values(2, 3, 4));

TEST(SharedBuffersChoice, AutoOnOneHostHandsOutSharedBuffersFromTheThreshold) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) { return options(RingSharedBuffers::Auto, "auto"); });
  EXPECT_EQ(pgs[0]->shared_buffers(), "from " + std::to_string(kRingSharedMinBytes) + " bytes");
  EXPECT_TRUE(find_shared(pgs[0]->shared_zeros({4}, DType::F32, Device::cpu()).data_ptr(), 4).has_value());
}

TEST(SharedBuffersChoice, OverTcpAutoIsOffAndSaysWhyAndOnFailsOnEveryRank) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) { return options(RingSharedBuffers::Auto, "tcp", RingTransport::Tcp); });
  EXPECT_EQ(pgs[0]->shared_buffers(), "off: the ranks are not all on one host with the shm transport");
  EXPECT_FALSE(find_shared(pgs[1]->shared_zeros({4}, DType::F32, Device::cpu()).data_ptr(), 4).has_value());
  expect_every_rank_fails_to_start(
      server, 2, [](int) { return options(RingSharedBuffers::On, "tcp-on", RingTransport::Tcp); },
      [](const std::string& m) {
        EXPECT_NE(m.find("ring shared buffers 'on': the ring's transport is 'tcp'"), std::string::npos) << m;
      });
}

TEST(SharedBuffersChoice, DifferentModesOnTwoRanksFailNamingBoth) {
  StoreServer server({});
  expect_every_rank_fails_to_start(
      server, 2, [](int r) { return options(r == 0 ? RingSharedBuffers::On : RingSharedBuffers::Off, "modes"); },
      [](const std::string& m) {
        EXPECT_TRUE(m.find("ring shared buffers: rank 0 asks for 'on' and rank 1 for 'off'") != std::string::npos ||
                    m.find("ring shared buffers: rank 1 asks for 'off' and rank 0 for 'on'") != std::string::npos)
            << m;
      });
}

TEST(SharedBuffersChoice, AnUnknownModeIsAnErrorNamingWhereItCameFrom) {
  try {
    parse_ring_shared_buffers("maybe", "TANDEM_RING_SHARED_BUFFERS");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "TANDEM_RING_SHARED_BUFFERS: 'maybe' is not a ring shared-buffers mode (auto, off, on)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SharedBuffersFailures, ARankWithAnOrdinaryTensorWhereThePeersHaveSharedOnesFailsAtTheFirstFrame) {
  TANDEM_SKIP_UNLESS_MEMFDS_MAP();
  // The long timeout: the error must come from the frames, not from waiting.
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) {
    ProcessGroupOptions o = options(RingSharedBuffers::On, "mixed");
    o.timeout = 60000ms;
    return o;
  });
  std::vector<Tensor> t = {buffer_of(*pgs[0], std::vector<double>(100, 1.0), DType::F32), Tensor::full({100}, 1.0)};
  std::vector<std::shared_ptr<Work>> works;
  for (int r = 0; r < 2; ++r) works.push_back(pgs[static_cast<size_t>(r)]->all_reduce(t[static_cast<size_t>(r)], ReduceOp::Sum));
  for (int r = 0; r < 2; ++r) {
    try {
      works[static_cast<size_t>(r)]->wait(60000ms);
      ADD_FAILURE() << "rank " << r << ": expected an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("(direct all_reduce f32, message 0)"), std::string::npos) << "rank " << r << ": " << m;
      EXPECT_NE(m.find("or an all_reduce on shared buffers (ProcessGroup::shared_zeros) on one rank and on ordinary "
                       "tensors on another"),
                std::string::npos)
          << "rank " << r << ": " << m;
    }
  }
}

}  // namespace
}  // namespace tandem::comm
