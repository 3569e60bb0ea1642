// Where DDP divides by the world size: without a comm hook, in the copy of
// each gradient into its bucket (PyTorch's Reducer does the same), so the
// collective receives the average's terms; with a hook, not at all, so the
// hook receives the local sum (a hook ported from PyTorch divides once).
//
// Checked in one process against a "mirror" group of two ranks whose peer
// holds exactly this rank's gradients: a sum over it doubles, so every
// average equals the local gradient, and the buffer the all_reduce receives
// shows whether it was divided before.
#include <gtest/gtest.h>

#include <map>

#include "ddp/distributed_data_parallel.h"
#include "kernels/cpu/elementwise_cpu.h"
#include "tests/ddp/ddp_scenario.h"

namespace tandem::testing {
namespace {

std::shared_ptr<comm::Work> done(const char* op) {
  auto w = std::make_shared<comm::Work>(op, std::vector<Tensor>{});
  w->mark_started();
  w->mark_completed();
  return w;
}

void times(const Tensor& in, const Tensor& out, double k) {
  kernels::scale_cpu(in.data_ptr(), out.data_ptr(), in.dtype(), in.numel(), k);
  out.bump_version();
}

// A float tensor's elements (bit-exact comparisons below: the division is one
// rounding, done the same way on every path).
std::vector<float> values(const Tensor& t) {
  Tensor c = t.clone();
  const float* p = static_cast<const float*>(c.data_ptr());
  return std::vector<float>(p, p + c.numel());
}

// Rank 0 of two; rank 1 is this rank's mirror image. Records a copy of what
// each floating-point all_reduce is handed.
class MirrorGroup final : public comm::ProcessGroup {
 public:
  MirrorGroup() : ProcessGroup(0, 2) {}
  std::string backend_name() const override { return "mirror"; }
  comm::DeviceCompletion device_completion() const override { return comm::DeviceCompletion::OnHost; }
  std::shared_ptr<comm::Work> all_reduce(Tensor& t, comm::ReduceOp op) override { return all_reduce(t, t, op); }
  std::shared_ptr<comm::Work> all_reduce(const Tensor& in, Tensor& out, comm::ReduceOp op) override {
    EXPECT_EQ(op, comm::ReduceOp::Sum);
    if (in.dtype() != DType::I32) handed.push_back(in.clone());
    if (in.dtype() == DType::I32) {
      out.copy_(in);  // the used map: "used anywhere" is what matters, not the count
    } else {
      times(in, out, 2.0);
    }
    return done("all_reduce");
  }
  std::shared_ptr<comm::Work> broadcast(Tensor&, int) override { return done("broadcast"); }
  std::shared_ptr<comm::Work> all_gather(const Tensor& in, Tensor& out) override {
    out.view_range(0, in.shape()).copy_(in);
    out.view_range(in.numel(), in.shape()).copy_(in);
    return done("all_gather");
  }
  std::shared_ptr<comm::Work> reduce_scatter(const Tensor& in, Tensor& out, comm::ReduceOp) override {
    times(in.view_range(0, out.shape()), out, 2.0);
    return done("reduce_scatter");
  }
  std::shared_ptr<comm::Work> barrier() override { return done("barrier"); }

  std::vector<Tensor> handed;
};

// The local gradients of one step of the scenario model, without DDP.
std::map<std::string, Tensor> local_gradients(int64_t step) {
  auto model = std::make_shared<ScenarioMlp>(1);
  mse(model->forward(scenario_inputs(step, 0, 4), /*use_branch=*/true), scenario_targets(step, 0, 4)).backward();
  std::map<std::string, Tensor> g;
  for (const auto& [name, p] : model->named_parameters()) g[name] = p.grad().clone();
  return g;
}

class BucketAveraging : public ::testing::Test {
 protected:
  void start(bool with_hook, bool gradient_as_bucket_view) {
    group_ = std::make_shared<MirrorGroup>();
    model_ = std::make_shared<ScenarioMlp>(1);
    ddp::DDPOptions o;
    o.bucket_cap_mb = 0;  // one bucket per parameter: each handed buffer is one gradient
    o.first_bucket_cap_mb = 0;
    o.gradient_as_bucket_view = gradient_as_bucket_view;
    if (with_hook) {
      o.comm_hook = [this, hook = ddp::allreduce_hook()](void* state, comm::ProcessGroup& g, ddp::GradBucket& b) {
        hook_saw_.push_back(b.buffer.clone());
        return hook(state, g, b);
      };
      o.comm_hook_name = "recording allreduce_hook";
    }
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, group_, o);
    // The first iteration has one bucket for everything; after it, one per parameter.
    step(0);
  }
  // One synchronised step from zeroed gradients (cleared in place, as an optimizer's zero_grad does).
  void step(int64_t s) {
    for (const auto& [name, p] : model_->named_parameters())
      if (p.grad().defined()) p.grad().zero_();
    group_->handed.clear();
    hook_saw_.clear();
    mse(ddp_->forward([&] { return model_->forward(scenario_inputs(s, 0, 4), /*use_branch=*/true); }), scenario_targets(s, 0, 4))
        .backward();
  }
  // Each handed buffer matched to the parameter whose gradient it holds (same size, scaled by `k`).
  void expect_handed_scaled_by(double k, int64_t s) {
    const auto reference = local_gradients(s);
    ASSERT_EQ(group_->handed.size(), reference.size());
    for (const auto& [name, g] : reference) {
      bool found = false;
      for (const Tensor& h : group_->handed) {
        if (h.numel() != g.numel()) continue;
        Tensor expected = Tensor::empty({g.numel()}, g.dtype(), g.device());
        times(g.reshape({g.numel()}), expected, k);
        found = found || values(h) == values(expected);
      }
      EXPECT_TRUE(found) << name << ": no all_reduce was handed its gradient times " << k;
    }
  }
  void expect_gradients_are_the_local_ones(int64_t s) {
    const auto reference = local_gradients(s);
    for (const auto& [name, p] : model_->named_parameters())
      EXPECT_EQ(values(p.grad()), values(reference.at(name))) << name << " after step " << s;
  }

  std::shared_ptr<MirrorGroup> group_;
  std::vector<Tensor> hook_saw_;
  std::shared_ptr<ScenarioMlp> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
};

TEST_F(BucketAveraging, WithoutAHookTheCollectiveIsHandedGradientsAlreadyDividedByTheWorldSize) {
  start(/*with_hook=*/false, /*gradient_as_bucket_view=*/false);
  step(1);
  expect_handed_scaled_by(0.5, 1);
  expect_gradients_are_the_local_ones(1);
}

TEST_F(BucketAveraging, WithGradientAsBucketViewTheGradientIsDividedInItsBucket) {
  // From the second step the gradient is the bucket view itself: divided in place.
  start(/*with_hook=*/false, /*gradient_as_bucket_view=*/true);
  for (int64_t s = 1; s < 4; ++s) {
    step(s);
    expect_handed_scaled_by(0.5, s);
    expect_gradients_are_the_local_ones(s);
  }
}

TEST_F(BucketAveraging, AHookIsHandedTheUndividedLocalSumAndAveragesItself) {
  start(/*with_hook=*/true, /*gradient_as_bucket_view=*/false);
  step(1);
  // The hook (allreduce_hook, recording what it is handed) divides once
  // itself, so its collective sees halves and the average is right.
  ASSERT_EQ(hook_saw_.size(), group_->handed.size());
  group_->handed.swap(hook_saw_);
  expect_handed_scaled_by(1.0, 1);
  group_->handed.swap(hook_saw_);
  expect_handed_scaled_by(0.5, 1);
  expect_gradients_are_the_local_ones(1);
}

}  // namespace
}  // namespace tandem::testing
