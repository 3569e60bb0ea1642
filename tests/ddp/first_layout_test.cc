// The bucket layout of the first iteration, as PyTorch's DistributedDataParallel
// builds it (buckets formed in registration order, then the list reversed),
// checked in one process over a one-rank ring group.
#include <gtest/gtest.h>

#include <numeric>

#include "comm/ring_process_group.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/ddp/ddp_scenario.h"

namespace tandem::testing {
namespace {

class FirstLayout : public ::testing::Test {
 protected:
  void start(bool find_unused, bool static_graph, double first_cap_mb, double cap_mb) {
    server_ = std::make_unique<comm::StoreServer>(comm::StoreServer::Options{});
    auto store = std::make_shared<comm::Store>("127.0.0.1", server_->port());
    group_ = std::make_shared<comm::RingProcessGroup>(store, 0, 1);
    model_ = std::make_shared<ScenarioMlp>(1);
    ddp::DDPOptions o;
    o.find_unused_parameters = find_unused;
    o.static_graph = static_graph;
    o.first_bucket_cap_mb = first_cap_mb;
    o.bucket_cap_mb = cap_mb;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, group_, o);
  }
  void step() {
    Tensor x = scenario_inputs(0, 0, 4), t = scenario_targets(0, 0, 4);
    mse(ddp_->forward([&] { return model_->forward(x, /*use_branch=*/true); }), t).backward();
  }
  std::vector<int> all_parameters() const {
    std::vector<int> v(model_->named_parameters().size());
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  std::unique_ptr<comm::StoreServer> server_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<ScenarioMlp> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

TEST_F(FirstLayout, IsOneBucketWhereTheBucketsAreRebuiltAfterIt) {
  // bucket_cap 0 would give one bucket per parameter; it applies from the rebuild on.
  start(/*find_unused=*/false, /*static_graph=*/false, 0, 0);
  ASSERT_EQ(ddp_->buckets().size(), 1u);
  EXPECT_EQ(ddp_->buckets()[0].params, all_parameters()) << "registration order within the bucket";
  step();
  step();
  EXPECT_EQ(ddp_->buckets().size(), all_parameters().size()) << "rebuilt with the caps after the first iteration";
}

TEST_F(FirstLayout, StaticGraphAlsoStartsWithOneBucket) {
  start(/*find_unused=*/false, /*static_graph=*/true, 0, 0);
  EXPECT_EQ(ddp_->buckets().size(), 1u);
}

TEST_F(FirstLayout, WithFindUnusedTheParametersDefinedFirstGetTheSmallBucketLaunchedLast) {
  // First cap 0: the first-defined parameter closes the small bucket alone;
  // the large cap takes all the others. Reversed: the large bucket goes first.
  start(/*find_unused=*/true, /*static_graph=*/false, 0, 1000);
  const std::vector<int> all = all_parameters();
  ASSERT_EQ(ddp_->buckets().size(), 2u);
  EXPECT_EQ(ddp_->buckets()[0].params, std::vector<int>(all.begin() + 1, all.end()));
  EXPECT_EQ(ddp_->buckets()[1].params, std::vector<int>{0});
  step();
  step();
  EXPECT_EQ(ddp_->buckets().size(), 2u) << "find_unused_parameters without static_graph never rebuilds";
}

}  // namespace
}  // namespace tandem::testing
