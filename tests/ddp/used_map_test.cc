// The used-parameter map of find_unused_parameters and static_graph, checked
// in one process over a one-rank ring group wrapped to record every
// collective: when its all-reduce is issued and how often (the map is the
// only int32 all-reduce DDP issues).
#include <gtest/gtest.h>

#include "comm/ring_process_group.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "ddp/distributed_data_parallel.h"
#include "tests/ddp/ddp_scenario.h"

namespace tandem::testing {
namespace {

// Forwards to a real group and counts the int32 all-reduces.
class CountingGroup final : public comm::ProcessGroup {
 public:
  explicit CountingGroup(std::shared_ptr<comm::ProcessGroup> inner)
      : ProcessGroup(inner->rank(), inner->size()), inner_(std::move(inner)) {}
  std::string backend_name() const override { return inner_->backend_name(); }
  comm::DeviceCompletion device_completion() const override { return inner_->device_completion(); }
  std::shared_ptr<comm::Work> all_reduce(Tensor& t, comm::ReduceOp op) override {
    count(t);
    return inner_->all_reduce(t, op);
  }
  std::shared_ptr<comm::Work> all_reduce(const Tensor& in, Tensor& out, comm::ReduceOp op) override {
    count(in);
    return inner_->all_reduce(in, out, op);
  }
  std::shared_ptr<comm::Work> broadcast(Tensor& t, int root) override { return inner_->broadcast(t, root); }
  std::shared_ptr<comm::Work> all_gather(const Tensor& in, Tensor& out) override {
    return inner_->all_gather(in, out);
  }
  std::shared_ptr<comm::Work> reduce_scatter(const Tensor& in, Tensor& out, comm::ReduceOp op) override {
    return inner_->reduce_scatter(in, out, op);
  }
  std::shared_ptr<comm::Work> barrier() override { return inner_->barrier(); }

  int int32_all_reduces = 0;

 private:
  void count(const Tensor& t) { int32_all_reduces += t.dtype() == DType::I32 ? 1 : 0; }
  std::shared_ptr<comm::ProcessGroup> inner_;
};

class UsedMap : public ::testing::Test {
 protected:
  void start(bool find_unused, bool static_graph) {
    server_ = std::make_unique<comm::StoreServer>(comm::StoreServer::Options{});
    auto store = std::make_shared<comm::Store>("127.0.0.1", server_->port());
    group_ = std::make_shared<CountingGroup>(std::make_shared<comm::RingProcessGroup>(store, 0, 1));
    model_ = std::make_shared<ScenarioMlp>(1);
    ddp::DDPOptions o;
    o.find_unused_parameters = find_unused;
    o.static_graph = static_graph;
    o.bucket_cap_mb = 0;  // several buckets
    o.first_bucket_cap_mb = 0;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, group_, o);
  }
  void step(int i) {
    Tensor x = scenario_inputs(0, i, 4), t = scenario_targets(0, i, 4);
    mse(ddp_->forward([&] { return model_->forward(x, /*use_branch=*/false); }), t).backward();
  }
  int used_map_reductions() const { return group_->int32_all_reduces; }

  std::unique_ptr<comm::StoreServer> server_;
  std::shared_ptr<CountingGroup> group_;
  std::shared_ptr<ScenarioMlp> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

TEST_F(UsedMap, FindUnusedIssuesItsReductionBeforeAutogradEnds) {
  // Issued as the last bucket launches, it overlaps that bucket's reduction
  // instead of starting after the end of backward.
  start(/*find_unused=*/true, /*static_graph=*/false);
  std::vector<int> issued_at_autograd_end;
  ddp_->set_autograd_end_hook([&] { issued_at_autograd_end.push_back(used_map_reductions()); });
  for (int i = 0; i < 3; ++i) step(i);
  EXPECT_EQ(issued_at_autograd_end, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(used_map_reductions(), 3) << "find_unused_parameters reduces the map every iteration";
}

TEST_F(UsedMap, StaticGraphReducesItOnlyInTheFirstIteration) {
  start(/*find_unused=*/false, /*static_graph=*/true);
  for (int i = 0; i < 4; ++i) step(i);
  EXPECT_EQ(used_map_reductions(), 1);
}

TEST_F(UsedMap, AParameterNoRankUsedKeepsNoGradientUnderStaticGraph) {
  // The cached map still decides, in every iteration after the first.
  start(/*find_unused=*/false, /*static_graph=*/true);
  for (int i = 0; i < 3; ++i) {
    step(i);
    for (const auto& [name, p] : model_->named_parameters())
      EXPECT_EQ(p.grad().defined(), name.rfind("branch.", 0) != 0) << name << " after step " << i;
  }
}

}  // namespace
}  // namespace tandem::testing
