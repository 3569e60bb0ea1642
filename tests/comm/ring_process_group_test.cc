// The ring backend's contract with its caller, with ranks as threads of one
// process: asynchronous ops in issue order with real start/end stamps, waits
// that time out, tensors kept alive by the Work, and a peer that stops
// answering turning into an error that names it.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "comm/ring_process_group.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/check.h"
#include "tests/comm/ring_testing.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;
using testing::start_ring;

ProcessGroupOptions options(std::chrono::milliseconds timeout = 10000ms) {
  ProcessGroupOptions o;
  o.timeout = timeout;
  return o;
}

TEST(RingProcessGroup, OpsCompleteInIssueOrderWithStartAndEndStamps) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, options());
  std::vector<std::vector<Tensor>> data(2);
  std::vector<std::vector<std::shared_ptr<Work>>> works(2);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      data[r].push_back(Tensor::full({1000 + i}, r + i, DType::F32));
      works[r].push_back(pgs[r]->all_reduce(data[r].back(), ReduceOp::Sum));
    }
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(works[r][i]->wait(10000ms));
      EXPECT_EQ(data[r][i].to_double_vector()[0], 2 * i + 1);
      EXPECT_LE(works[r][i]->start_time(), works[r][i]->end_time());
      if (i > 0) {
        EXPECT_LE(works[r][i - 1]->end_time(), works[r][i]->start_time());
      }
    }
}

TEST(RingProcessGroup, WaitReturnsFalseWhileAPeerHasNotIssuedTheOpYet) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, options());
  Tensor a = Tensor::full({10}, 1.0), b = Tensor::full({10}, 2.0);
  auto wa = pgs[0]->all_reduce(a, ReduceOp::Sum);
  EXPECT_FALSE(wa->wait(20ms));  // rank 1 has not issued it: it cannot be done
  EXPECT_FALSE(wa->is_completed());
  auto wb = pgs[1]->all_reduce(b, ReduceOp::Sum);
  EXPECT_TRUE(wa->wait(10000ms));
  EXPECT_TRUE(wb->wait(10000ms));
  EXPECT_EQ(a.to_double_vector(), std::vector<double>(10, 3.0));
}

TEST(RingProcessGroup, TheWorkKeepsItsTensorsAlive) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, options());
  std::shared_ptr<Work> w0, w1;
  Tensor result0;
  {
    Tensor t0 = Tensor::full({50000}, 1.0), t1 = Tensor::full({50000}, 1.0);
    result0 = t0.detach();  // shares storage, so the result can be read after the handles go
    w0 = pgs[0]->all_reduce(t0, ReduceOp::Sum);
    w1 = pgs[1]->all_reduce(t1, ReduceOp::Sum);
  }
  ASSERT_TRUE(w0->wait(10000ms));
  ASSERT_TRUE(w1->wait(10000ms));
  EXPECT_EQ(result0.to_double_vector()[49999], 2.0);
}

TEST(RingProcessGroup, ASilentPeerTimesOutWithAnErrorNamingIt) {
  StoreServer server({});
  auto pgs = start_ring(server, 3, options(300ms));
  std::vector<Tensor> t = {Tensor::full({4}, 1.0), Tensor::full({4}, 1.0)};
  auto w0 = pgs[0]->all_reduce(t[0], ReduceOp::Sum);
  auto w1 = pgs[1]->all_reduce(t[1], ReduceOp::Sum);  // rank 2 never joins
  try {
    w1->wait(10000ms);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("rank(s) 2 did not reach this collective"), std::string::npos) << m;
  }
  EXPECT_THROW(w0->wait(10000ms), Error);
  // A failed group refuses further work instead of hanging.
  Tensor more = Tensor::full({4}, 1.0);
  EXPECT_THROW(pgs[1]->all_reduce(more, ReduceOp::Sum)->wait(10000ms), Error);
}

TEST(RingProcessGroup, MismatchedSizesAreRejectedBeforeAnythingIsSent) {
  StoreServer server({});
  auto pgs = start_ring(server, 2, options());
  Tensor in = Tensor::zeros({4}), out = Tensor::zeros({5});
  EXPECT_THROW(pgs[0]->all_reduce(in, out, ReduceOp::Sum), Error);
  Tensor gathered = Tensor::zeros({7});
  EXPECT_THROW(pgs[0]->all_gather(in, gathered), Error);
  EXPECT_THROW(pgs[0]->broadcast(in, 2), Error);
  Tensor u8 = Tensor::zeros({4}, DType::U8);
  EXPECT_THROW(pgs[0]->all_reduce(u8, ReduceOp::Sum), Error);
}

TEST(RingProcessGroup, ADifferentSizeOnAnotherRankFailsAtTheFirstFrameNamingItAndBothFrames) {
  // A minute of timeout: the error must come from the frame header, not from waiting.
  StoreServer server({});
  auto pgs = start_ring(server, 2, options(60000ms));
  Tensor a = Tensor::full({100}, 1.0), b = Tensor::full({99}, 1.0);
  auto wa = pgs[0]->all_reduce(a, ReduceOp::Sum);
  auto wb = pgs[1]->all_reduce(b, ReduceOp::Sum);
  // Segments of 50 + 50 against 50 + 49 elements: rank 0 meets a 196-byte frame
  // where it expects 200 bytes in message 0, rank 1 the reverse in message 1
  // (headers go out ahead of their gated payload). Whichever fails first, the
  // other quotes it as the group's first failure.
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

TEST(RingFrame, AHeaderRoundTripsAndOtherBytesAreNotAHeader) {
  RingFrame f{.seq = 1234567890123ull, .op = RingOp::Broadcast, .dtype = DType::BF16, .root = 3, .step = 7,
              .bytes = 1ull << 40};
  unsigned char wire[kRingFrameHeaderBytes];
  encode_ring_frame(f, wire);
  RingFrame back;
  ASSERT_TRUE(decode_ring_frame(wire, &back));
  EXPECT_EQ(back, f);
  EXPECT_EQ(describe_ring_frame(f), "sequence 1234567890123, 1099511627776 bytes (broadcast from root 3 bf16, message 7)");
  // Payload bytes read where a header belongs (streams out of step) are told apart.
  unsigned char payload[kRingFrameHeaderBytes];
  for (size_t i = 0; i < sizeof payload; ++i) payload[i] = static_cast<unsigned char>(0x3f + i);
  EXPECT_FALSE(decode_ring_frame(payload, &back));
}

TEST(RingProcessGroup, ASingleRankGroupNeedsNoPeers) {
  StoreServer server({});
  auto pgs = start_ring(server, 1, options());
  Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  ASSERT_TRUE(pgs[0]->all_reduce(t, ReduceOp::Avg)->wait(1000ms));
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, 2, 3}));
  ASSERT_TRUE(pgs[0]->barrier()->wait(1000ms));
}

TEST(RingProcessGroup, SmallChunksPipelineTheSameResult) {
  // 8-byte chunks: every element of every step is its own pipeline stage.
  StoreServer server({});
  ProcessGroupOptions o = options();
  o.ring_chunk_bytes = 8;
  auto pgs = start_ring(server, 3, o);
  std::vector<Tensor> t;
  std::vector<std::shared_ptr<Work>> w;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> v(1001);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 10) + r;
    t.push_back(Tensor::from_vector(v, {1001}, DType::F64));
  }
  for (int r = 0; r < 3; ++r) w.push_back(pgs[r]->all_reduce(t[r], ReduceOp::Sum));
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(w[r]->wait(10000ms));
    auto got = t[r].to_double_vector();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 3.0 * static_cast<double>(i % 10) + 3) << i;
  }
}

}  // namespace
}  // namespace tandem::comm
