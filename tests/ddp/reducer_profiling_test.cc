// What the Reducer offers a profiler, checked in one process over a one-rank
// ring group: the end-of-autograd hook, the iteration's absolute stamps, the
// completion of comm stats, and the parameter names of each bucket.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "comm/ring_process_group.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/autograd/engine.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/ddp/ddp_scenario.h"

namespace tandem::testing {
namespace {

class ReducerProfiling : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<comm::StoreServer>(comm::StoreServer::Options{});
    auto store = std::make_shared<comm::Store>("127.0.0.1", server_->port());
    group_ = std::make_shared<comm::RingProcessGroup>(store, 0, 1);
    model_ = std::make_shared<ScenarioMlp>(1);
    ddp::DDPOptions o;
    o.bucket_cap_mb = 0;  // one bucket per parameter: several buckets to name
    o.first_bucket_cap_mb = 0;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, group_, o);
  }
  void step(bool sync) {
    Tensor x = scenario_inputs(0, 0, 4), t = scenario_targets(0, 0, 4);
    auto run = [&] { mse(ddp_->forward([&] { return model_->forward(x, /*use_branch=*/true); }), t).backward(); };
    if (sync) {
      run();
    } else {
      auto guard = ddp_->no_sync();
      run();
    }
  }

  std::unique_ptr<comm::StoreServer> server_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<ScenarioMlp> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

TEST_F(ReducerProfiling, AutogradEndHookRunsInsideEachSynchronisedBackwardOnly) {
  int calls = 0;
  bool inside_backward = false;
  ddp_->set_autograd_end_hook([&] {
    ++calls;
    inside_backward = in_backward();
  });
  step(/*sync=*/false);
  EXPECT_EQ(calls, 0) << "no_sync reduces nothing, so there is no wait to mark";
  step(/*sync=*/true);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(inside_backward);
  step(/*sync=*/true);
  EXPECT_EQ(calls, 2);
  ddp_->set_autograd_end_hook(nullptr);
  step(/*sync=*/true);
  EXPECT_EQ(calls, 2);
}

TEST_F(ReducerProfiling, StatsCarryOrderedAbsoluteStampsAndCompleteCommTimes) {
  const auto before = std::chrono::steady_clock::now();
  step(true);
  const auto after = std::chrono::steady_clock::now();
  const ddp::IterationStats& s = ddp_->stats();
  EXPECT_LE(before, s.forward_start);
  EXPECT_LE(s.forward_start, s.backward_start);
  EXPECT_LE(s.backward_start, s.autograd_end);
  EXPECT_LE(s.autograd_end, after);
  EXPECT_TRUE(s.comm_complete) << "the ring backend completes on the host before backward returns";
  for (const auto& b : s.buckets) EXPECT_LE(b.comm_start_ms, b.comm_end_ms);
  const ddp::IterationStats& completed = ddp_->complete_stats();
  EXPECT_EQ(&completed, &s);
  EXPECT_EQ(completed.buckets.size(), ddp_->buckets().size());
}

TEST_F(ReducerProfiling, CommTimeIsTheUnionOfTheBucketsNotTheirSpan) {
  // The one derivation (ddp::comm_times): what train logs call
  // backward_comm_ms is what the benches and the report call comm_ms.
  step(true);
  step(true);
  const ddp::IterationStats& s = ddp_->complete_stats();
  ASSERT_GT(s.buckets.size(), 1u);
  double busy = 0, first = s.buckets[0].comm_start_ms, last = 0;
  for (const auto& b : s.buckets) {
    busy += b.comm_end_ms - b.comm_start_ms;  // one comm thread: the buckets' intervals never overlap
    first = std::min(first, b.comm_start_ms);
    last = std::max(last, b.comm_end_ms);
  }
  EXPECT_NEAR(s.backward_comm_ms, busy, 1e-9);
  EXPECT_LE(s.backward_comm_ms, last - first + 1e-9);
  EXPECT_LE(s.overlap_ms, s.backward_comm_ms + 1e-9);
  EXPECT_FALSE(s.device_timed) << "CPU parameters: host clocks";
}

TEST_F(ReducerProfiling, EachGradientsReadyTimeIsRecordedAndItsBucketIsReadyNoEarlier) {
  step(true);
  step(true);  // after the rebuild: buckets in ready order
  const ddp::IterationStats& s = ddp_->stats();
  const auto names = ddp_->bucket_parameter_names();
  ASSERT_EQ(s.ready_order.size(), s.ready_ms.size());
  ASSERT_EQ(s.ready_order.size(), s.ready_bytes.size());
  std::map<std::string, size_t> bytes;
  for (const auto& [name, t] : model_->named_parameters()) bytes[name] = t.nbytes();
  ASSERT_EQ(s.ready_order.size(), bytes.size());
  for (size_t i = 0; i < s.ready_order.size(); ++i) {
    EXPECT_EQ(s.ready_bytes[i], bytes.at(s.ready_order[i])) << s.ready_order[i];
    EXPECT_GE(s.ready_ms[i], 0);
    EXPECT_LE(s.ready_ms[i], s.backward_compute_ms);
    if (i > 0) {
      EXPECT_LE(s.ready_ms[i - 1], s.ready_ms[i]) << "listed in the order they became ready";
    }
  }
  // A bucket is launched when its last gradient is in, so no earlier than any of its gradients.
  ASSERT_EQ(names.size(), s.buckets.size());
  for (size_t b = 0; b < names.size(); ++b)
    for (const std::string& n : names[b]) {
      const size_t i = static_cast<size_t>(std::find(s.ready_order.begin(), s.ready_order.end(), n) -
                                           s.ready_order.begin());
      ASSERT_LT(i, s.ready_order.size()) << n;
      EXPECT_LE(s.ready_ms[i], s.buckets[b].ready_ms) << n;
    }
}

TEST_F(ReducerProfiling, BucketParameterNamesNameEveryParameterOnceInBucketOrder) {
  step(true);  // buckets are rebuilt in ready order after the first iteration
  step(true);
  const auto names = ddp_->bucket_parameter_names();
  const auto& layout = ddp_->buckets();
  ASSERT_EQ(names.size(), layout.size());
  ASSERT_GT(names.size(), 1u);
  std::multiset<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(names[i].size(), layout[i].params.size());
    seen.insert(names[i].begin(), names[i].end());
  }
  std::multiset<std::string> expected;
  for (const auto& [name, p] : model_->named_parameters()) expected.insert(name);
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace tandem::testing
