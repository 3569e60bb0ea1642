// The ring's shared-memory transport (comm/shm_ring.h): the byte ring on its
// own, then whole groups (ranks as threads of one process, so one host) whose
// every collective must equal the TCP path bit for bit, the transport choice
// and its errors, and a frame mismatch caught as over TCP.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>

#include "comm/ring_process_group.h"
#include "comm/shm_ring.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/check.h"
#include "tests/comm/ring_testing.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;
using testing::expect_every_rank_fails_to_start;
using testing::start_ring;

// --- the byte ring ----------------------------------------------------------------

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

TEST(ShmRing, MessagesComeOutInOrderAcrossTheRingsEndAndStartEightByteAligned) {
  SocketPair liveness;
  auto ring = ShmRing::create(64);
  ShmSendEnd out(ring, liveness.fd[0]);
  ShmRecvEnd in(ShmRing::attach({::dup(ring->fds().memory), ::dup(ring->fds().data), ::dup(ring->fds().room)}, "test"),
                liveness.fd[1]);
  // Odd sizes, so that without alignment the messages would start anywhere.
  for (size_t len : {1, 3, 13, 40, 7, 64, 5, 29}) {
    std::vector<char> msg(len), got(len);
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>(len * 31 + i);
    out.begin_message();
    in.begin_message();
    size_t sent = 0, received = 0;
    bool first = true;
    while (received < len) {
      if (sent < len) {
        iovec v{msg.data() + sent, len - sent};
        sent += out.write_some(&v, 1);
      }
      if (first) {
        auto [at, avail] = in.peek();
        ASSERT_GT(avail, 0u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(at) % 8, 0u) << "message of " << len;
        first = false;
      }
      iovec v{got.data() + received, len - received};
      received += in.read_some(&v, 1);
    }
    EXPECT_EQ(got, msg) << "message of " << len;
  }
}

TEST(ShmRing, AWriterStopsAtCapacityAndGoesOnOnceTheReaderConsumes) {
  SocketPair liveness;
  auto ring = ShmRing::create(64);
  ShmSendEnd out(ring, liveness.fd[0]);
  ShmRecvEnd in(ShmRing::attach({::dup(ring->fds().memory), ::dup(ring->fds().data), ::dup(ring->fds().room)}, "test"),
                liveness.fd[1]);
  std::vector<char> msg(100, 'x');
  iovec v{msg.data(), msg.size()};
  EXPECT_EQ(out.write_some(&v, 1), 64u);
  EXPECT_EQ(out.write_some(&v, 1), 0u);
  auto [at, avail] = in.peek();
  EXPECT_EQ(avail, 64u);
  in.consume(10);
  EXPECT_EQ(out.write_some(&v, 1), 10u);
}

TEST(ShmRing, APeerThatClosesItsConnectionWakesAWaitingReaderWithRingPeerLost) {
  SocketPair liveness;
  auto ring = ShmRing::create(64);
  ShmRecvEnd in(ShmRing::attach({::dup(ring->fds().memory), ::dup(ring->fds().data), ::dup(ring->fds().room)}, "test"),
                liveness.fd[1]);
  ::close(liveness.fd[0]);
  liveness.fd[0] = -1;
  pollfd fds[kRingEndMaxPollFds];
  int n = in.arm(fds, true);
  ASSERT_EQ(::poll(fds, static_cast<nfds_t>(n), 10000), 1);
  EXPECT_THROW(in.disarm(fds, n), RingPeerLost);
}

TEST(ShmRing, BytesWrittenBeforeThePeerClosedAreDeliveredBeforeItCountsAsGone) {
  // A rank that finished the last op and exited must not fail its neighbour's last op.
  SocketPair liveness;
  auto ring = ShmRing::create(64);
  ShmSendEnd out(ring, liveness.fd[0]);
  ShmRecvEnd in(ShmRing::attach({::dup(ring->fds().memory), ::dup(ring->fds().data), ::dup(ring->fds().room)}, "test"),
                liveness.fd[1]);
  char msg[10] = "last op", got[10] = {};
  iovec v{msg, sizeof msg};
  ASSERT_EQ(out.write_some(&v, 1), sizeof msg);
  ::close(liveness.fd[0]);
  liveness.fd[0] = -1;
  pollfd fds[kRingEndMaxPollFds];
  int n = in.arm(fds, true);
  ASSERT_GE(::poll(fds, static_cast<nfds_t>(n), 10000), 1);
  EXPECT_NO_THROW(in.disarm(fds, n));
  iovec r{got, sizeof got};
  EXPECT_EQ(in.read_some(&r, 1), sizeof msg);
  EXPECT_STREQ(got, "last op");
  n = in.arm(fds, true);
  ASSERT_GE(::poll(fds, static_cast<nfds_t>(n), 10000), 1);
  EXPECT_THROW(in.disarm(fds, n), RingPeerLost);
}

TEST(ShmRing, DescriptorsThatAreNotARingAreRefusedNamingTheSender) {
  int fd = ::memfd_create("not-a-ring", 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  try {
    ShmRing::attach({fd, -1, -1}, "rank 7");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the shared-memory ring from rank 7 has a foreign layout"), std::string::npos)
        << e.what();
  }
}

// --- whole groups -----------------------------------------------------------------

ProcessGroupOptions with(RingTransport t, size_t shm_bytes = 1 << 20, size_t chunk = 256 << 10) {
  ProcessGroupOptions o;
  o.timeout = 30000ms;
  o.ring_transport = t;
  o.ring_shm_bytes = shm_bytes;
  o.ring_chunk_bytes = chunk;
  return o;
}

// Values with every mantissa bit busy (floats) or spread (integers), so that a
// different order of additions would show in the bits.
Tensor noisy(int rank, int64_t count, DType d, int salt) {
  std::vector<double> v(static_cast<size_t>(count));
  const bool integer = d == DType::I32 || d == DType::I64;
  for (int64_t i = 0; i < count; ++i) {
    double x = std::sin(0.731 * static_cast<double>(i) + 1.37 * rank + salt) * (1 + rank);
    v[static_cast<size_t>(i)] = integer ? std::floor(x * 1e6) : x;
  }
  return Tensor::from_vector(v, {count}, d);
}

std::vector<char> bytes_of(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data_ptr());
  return std::vector<char>(p, p + t.nbytes());
}

// Every collective on `pgs` for one dtype and size; each rank's outputs, as bytes, in op order.
std::vector<std::vector<std::vector<char>>> run_every_op(const std::vector<std::shared_ptr<RingProcessGroup>>& pgs,
                                                         DType d, int64_t count) {
  const int n = static_cast<int>(pgs.size());
  std::vector<std::vector<std::vector<char>>> outputs(static_cast<size_t>(n));
  auto run = [&](auto issue) {
    std::vector<Tensor> results(static_cast<size_t>(n));
    std::vector<std::shared_ptr<Work>> works;
    for (int r = 0; r < n; ++r) works.push_back(issue(r, results[static_cast<size_t>(r)]));
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(works[static_cast<size_t>(r)]->wait(60000ms));
      outputs[static_cast<size_t>(r)].push_back(bytes_of(results[static_cast<size_t>(r)]));
    }
  };
  int salt = 0;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    ++salt;
    run([&](int r, Tensor& out) {
      out = noisy(r, count, d, salt);
      return pgs[static_cast<size_t>(r)]->all_reduce(out, op);
    });
    run([&](int r, Tensor& out) {
      Tensor in = noisy(r, count * n, d, salt);
      out = Tensor::zeros({count}, d);
      return pgs[static_cast<size_t>(r)]->reduce_scatter(in, out, op);
    });
  }
  run([&](int r, Tensor& out) {
    Tensor in = noisy(r, count, d, 7);
    out = Tensor::zeros({count * n}, d);
    return pgs[static_cast<size_t>(r)]->all_gather(in, out);
  });
  run([&](int r, Tensor& out) {
    out = noisy(r, count, d, 8);
    return pgs[static_cast<size_t>(r)]->broadcast(out, n - 1);
  });
  run([&](int r, Tensor& out) {
    out = Tensor::zeros({0}, d);
    return pgs[static_cast<size_t>(r)]->barrier();
  });
  return outputs;
}

class ShmGroups : public ::testing::TestWithParam<int> {};

TEST_P(ShmGroups, EveryCollectiveEqualsTheTcpPathBitForBit) {
  const int n = GetParam();
  StoreServer server({});
  // A 4 KiB ring and 64-byte chunks: most messages are larger than the ring
  // and wrap around it many times, and sizes are rarely a multiple of a chunk.
  auto shm = start_ring(server, n, [](int) { return with(RingTransport::Shm, 4096, 64); });
  auto tcp = start_ring(server, n, [](int) {
    ProcessGroupOptions o = with(RingTransport::Tcp, 4096, 64);
    o.group_name = "tcp";
    return o;
  });
  ASSERT_EQ(shm[0]->transport(), "shm");
  ASSERT_EQ(tcp[0]->transport(), "tcp");
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::F64}) {
    for (int64_t count : {0, 1, 7, 1001, 20011}) {
      auto a = run_every_op(shm, d, count), b = run_every_op(tcp, d, count);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(a[static_cast<size_t>(r)].size(), b[static_cast<size_t>(r)].size());
        for (size_t i = 0; i < a[static_cast<size_t>(r)].size(); ++i)
          ASSERT_EQ(a[static_cast<size_t>(r)][i], b[static_cast<size_t>(r)][i])
              << "rank " << r << ", op #" << i << ", " << dtype_name(d) << " x" << count;
      }
    }
  }
}

TEST_P(ShmGroups, ADefaultSizedRingAndChunkGiveTheSameSumAsTcp) {
  const int n = GetParam();
  StoreServer server({});
  auto shm = start_ring(server, n, [](int) { return with(RingTransport::Shm); });
  auto tcp = start_ring(server, n, [](int) {
    ProcessGroupOptions o = with(RingTransport::Tcp);
    o.group_name = "tcp";
    return o;
  });
  // 6 MiB of f32 (larger than the 4 MiB ring) and an odd element count.
  auto a = run_every_op(shm, DType::F32, (3 << 19) + 3), b = run_every_op(tcp, DType::F32, (3 << 19) + 3);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmGroups, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(RingTransportChoice, AutoTakesSharedMemoryOnOneHostAndTheVariableOverridesAuto) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) { return with(RingTransport::Auto); });
  EXPECT_EQ(pgs[0]->transport(), "shm");
  EXPECT_EQ(pgs[1]->transport(), "shm");
  ::setenv("TANDEM_RING_TRANSPORT", "tcp", 1);
  auto overridden = start_ring(server, 2, [](int) {
    ProcessGroupOptions o = with(RingTransport::Auto);
    o.group_name = "env";
    return o;
  });
  ::unsetenv("TANDEM_RING_TRANSPORT");
  EXPECT_EQ(overridden[0]->transport(), "tcp");
  Tensor a = Tensor::full({5}, 1.0), b = Tensor::full({5}, 2.0);
  auto wa = overridden[0]->all_reduce(a, ReduceOp::Sum);
  auto wb = overridden[1]->all_reduce(b, ReduceOp::Sum);
  ASSERT_TRUE(wa->wait(10000ms) && wb->wait(10000ms));
  EXPECT_EQ(a.to_double_vector(), std::vector<double>(5, 3.0));
}

TEST(RingTransportChoice, ShmAgainstTcpFailsOnEveryRankNamingBoth) {
  StoreServer server({});
  expect_every_rank_fails_to_start(
      server, 2, [](int r) { return with(r == 0 ? RingTransport::Shm : RingTransport::Tcp); },
      [](const std::string& m) {
        EXPECT_NE(m.find("ring transport: rank 0 asks for 'shm' and its neighbour rank 1 for 'tcp'"), std::string::npos)
            << m;
      });
}

TEST(RingTransportChoice, AnUnknownNameIsAnErrorNamingWhereItCameFrom) {
  try {
    parse_ring_transport("udp", "TANDEM_RING_TRANSPORT");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_RING_TRANSPORT: 'udp' is not a ring transport (auto, tcp, shm)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ShmFraming, ADifferentSizeOnAnotherRankFailsAtTheFirstFrameAsOverTcp) {
  // A minute of timeout: the error must come from the frame header, not from waiting.
  StoreServer server({});
  auto pgs = start_ring(server, 2, [](int) {
    ProcessGroupOptions o = with(RingTransport::Shm);
    o.timeout = 60000ms;
    return o;
  });
  ASSERT_EQ(pgs[0]->transport(), "shm");
  Tensor a = Tensor::full({100}, 1.0), b = Tensor::full({99}, 1.0);
  auto wa = pgs[0]->all_reduce(a, ReduceOp::Sum);
  auto wb = pgs[1]->all_reduce(b, ReduceOp::Sum);
  for (auto* w : {&wa, &wb}) {
    try {
      (*w)->wait(60000ms);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      const bool rank0_first = m.find("all_reduce #0 on rank 0: rank 1 (left neighbour, ") != std::string::npos &&
                               m.find("sent (sequence 0, 196 bytes (all_reduce f32, message 0)) where this rank "
                                      "expected (sequence 0, 200 bytes (all_reduce f32, message 0))") != std::string::npos;
      const bool rank1_first = m.find("all_reduce #0 on rank 1: rank 0 (left neighbour, ") != std::string::npos &&
                               m.find("sent (sequence 0, 200 bytes (all_reduce f32, message 1)) where this rank "
                                      "expected (sequence 0, 196 bytes (all_reduce f32, message 1))") != std::string::npos;
      EXPECT_TRUE(rank0_first || rank1_first) << m;
    }
  }
}

}  // namespace
}  // namespace tandem::comm
