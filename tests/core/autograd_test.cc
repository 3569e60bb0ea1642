// The backward engine's contract: gradients, accumulation, hooks, no-grad, and misuse errors.
#include <gtest/gtest.h>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/check.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/reduce.h"
#include "tests/testing/gradcheck.h"

namespace tandem {
namespace {

Tensor param(std::vector<double> v, Shape s, const char* name) {
  Tensor t = Tensor::from_vector(v, s, DType::F64);
  t.set_requires_grad(true).set_name(name);
  return t;
}

bool message_has(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }

TEST(Autograd, GradientsAccumulateIntoLeavesAcrossBackwardCalls) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor x = Tensor::from_vector(std::vector<double>{3, 4}, {2}, DType::F64);
  kernels::sum(kernels::mul(w, x)).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{3, 4}));
  kernels::sum(kernels::mul(w, x)).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{6, 8}));
  EXPECT_FALSE(x.grad().defined()) << "x does not require grad";
}

TEST(Autograd, AParameterUsedTwiceGetsTheSumOfBothPaths) {
  Tensor w = param({2, 3}, {2}, "w");
  // y = sum(w*w + w) -> dy/dw = 2w + 1
  kernels::sum(kernels::add(kernels::mul(w, w), w)).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{5, 7}));
}

TEST(Autograd, PostAccumulateHookFiresOncePerBackwardWithTheCompleteGradient) {
  Tensor w = param({2, 3}, {2}, "w");
  int calls = 0;
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().to_double_vector();
  });
  // w reaches the loss through three paths; the hook must see all three summed.
  Tensor y = kernels::add(kernels::add(kernels::mul(w, w), w), kernels::scale(w, 10));  // dy/dw = 2w + 11
  kernels::sum(y).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{15, 17}));
}

TEST(Autograd, HooksFollowTheGraphFromTheLossBackwards) {
  // A three-layer chain: the last layer's parameters are ready first, as DDP expects.
  Tensor w1 = param({1, 0, 0, 1}, {2, 2}, "w1");
  Tensor w2 = param({1, 1, 0, 1}, {2, 2}, "w2");
  Tensor w3 = param({2, 0, 0, 2}, {2, 2}, "w3");
  std::vector<std::string> order;
  for (Tensor* w : {&w1, &w2, &w3})
    w->register_post_accumulate_grad_hook([&](Tensor& p) { order.push_back(p.name()); });
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::F64);
  kernels::sum(kernels::linear(kernels::relu(kernels::linear(kernels::relu(kernels::linear(x, w1)), w2)), w3)).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w3", "w2", "w1"}));
}

TEST(Autograd, RemovedHooksNoLongerFire) {
  Tensor w = param({1}, {1}, "w");
  int calls = 0;
  uint64_t h = w.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
  w.remove_post_accumulate_grad_hook(h);
  kernels::sum(kernels::mul(w, w)).backward();
  EXPECT_EQ(calls, 0);
}

TEST(Autograd, HooksOnlyOnLeavesThatRequireGrad) {
  Tensor x = Tensor::zeros({2}, DType::F64);
  EXPECT_THROW(x.register_post_accumulate_grad_hook([](Tensor&) {}), Error);
  Tensor w = param({1, 2}, {2}, "w");
  Tensor y = kernels::scale(w, 2);
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](Tensor&) {}), Error);
}

TEST(Autograd, NoGradGuardRecordsNothingAndNests) {
  Tensor w = param({1, 2}, {2}, "w");
  {
    NoGradGuard outer;
    {
      NoGradGuard inner;
    }
    EXPECT_FALSE(GradMode::enabled());
    Tensor y = kernels::mul(w, w);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(y.grad_fn());
  }
  EXPECT_TRUE(GradMode::enabled());
  EXPECT_TRUE(kernels::mul(w, w).requires_grad());
}

TEST(Autograd, BackwardTwiceThroughFreedBuffersIsAnError) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor loss = kernels::sum(kernels::mul(w, w));
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(message_has(e, "second time")) << e.what();
    EXPECT_TRUE(message_has(e, "retain_graph")) << e.what();
  }
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor loss = kernels::sum(kernels::mul(w, w));
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{4, 8}));
}

TEST(Autograd, ModifyingASavedTensorInPlaceIsAnError) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor x = Tensor::from_vector(std::vector<double>{3, 4}, {2}, DType::F64);
  Tensor loss = kernels::sum(kernels::mul(w, x));
  x.fill_(0);
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(message_has(e, "modified in place")) << e.what();
  }
}

TEST(Autograd, ImplicitGradientOnlyForOneElementOutputs) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor y = kernels::mul(w, w);
  EXPECT_THROW(y.backward(), Error);
  y.backward(Tensor::from_vector(std::vector<double>{1, 1}, {2}, DType::F64));
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{2, 4}));
}

TEST(Autograd, BackwardOnATensorWithoutHistoryIsAnError) {
  Tensor x = Tensor::zeros({1}, DType::F64);
  EXPECT_THROW(x.backward(), Error);
}

// A node that returns a gradient of the wrong shape: the engine must name it.
class BadShapeNode final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor::zeros({3}, DType::F64)}; }
  std::string name() const override { return "BadShapeBackward"; }
};

TEST(Autograd, AGradientOfTheWrongShapeIsAnErrorNamingTheNode) {
  Tensor w = param({1, 2}, {2}, "w");
  Tensor y = Tensor::zeros({}, DType::F64);
  std::make_shared<BadShapeNode>()->connect({&w}, {&y});
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(message_has(e, "BadShapeBackward")) << e.what();
    EXPECT_TRUE(message_has(e, "[3]")) << e.what();
  }
}

// Passes its input through and gives it no gradient in backward.
class NoGradientNode final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
  std::string name() const override { return "NoGradientBackward"; }
};

TEST(Autograd, ANodesPostHookRunsWhenBackwardReachesItWithoutAGradient) {
  // w -> scale -> NoGradient -> y: the scale node and w's AccumulateGrad are
  // reached but receive no gradient (PyTorch still runs their post-hooks).
  Tensor w = param({1, 2}, {2}, "w");
  Tensor scaled = kernels::scale(w, 3);
  Tensor y = scaled.detach();
  std::make_shared<NoGradientNode>()->connect({&scaled}, {&y});
  int node_hook = 0, tensor_hook = 0;
  gradient_edge(w).fn->add_post_hook([&] { ++node_hook; });
  w.register_post_accumulate_grad_hook([&](Tensor&) { ++tensor_hook; });
  kernels::sum(y).backward();
  EXPECT_EQ(node_hook, 1);
  EXPECT_EQ(tensor_hook, 0) << "a tensor's post-accumulate hook needs a gradient, as in PyTorch";
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, ANodesPostHookRunsAfterItsGradientIsAccumulated) {
  Tensor w = param({1, 2}, {2}, "w");
  std::vector<double> seen;
  gradient_edge(w).fn->add_post_hook([&] { seen = w.grad().to_double_vector(); });
  kernels::sum(kernels::add(kernels::mul(w, w), w)).backward();  // dy/dw = 2w + 1
  EXPECT_EQ(seen, (std::vector<double>{3, 5}));
}

TEST(Autograd, ARemovedNodePostHookNoLongerRuns) {
  Tensor w = param({1}, {1}, "w");
  int calls = 0;
  const std::shared_ptr<Node> acc = gradient_edge(w).fn;
  acc->remove_post_hook(acc->add_post_hook([&] { ++calls; }));
  kernels::sum(kernels::mul(w, w)).backward();
  EXPECT_EQ(calls, 0);
}

// Returns, as w's gradient, a tensor it made (or a view of one): records where it lives.
class HandOverNode final : public Node {
 public:
  HandOverNode(bool keep_a_copy, bool as_view) : keep_a_copy_(keep_a_copy), as_view_(as_view) {}
  std::vector<Tensor> apply(std::vector<Tensor>&&) override {
    Tensor big = Tensor::full({as_view_ ? 4 : 2}, 1.0, DType::F64);
    Tensor g = as_view_ ? big.narrow(1, 2) : big;
    data = g.data_ptr();
    if (keep_a_copy_) kept = g;
    return {g};
  }
  std::string name() const override { return "HandOverBackward"; }
  const void* data = nullptr;
  Tensor kept;

 private:
  bool keep_a_copy_, as_view_;
};

Tensor through(const std::shared_ptr<HandOverNode>& node, Tensor& w) {
  Tensor y = Tensor::zeros({}, DType::F64);
  node->connect({&w}, {&y});
  return y;
}

TEST(Autograd, TheFirstGradientIsTakenWithoutACopyWhenNothingElseHoldsIt) {
  Tensor w = param({1, 2}, {2}, "w");
  auto node = std::make_shared<HandOverNode>(false, false);
  through(node, w).backward();
  EXPECT_EQ(w.grad().data_ptr(), node->data) << "as PyTorch's AccumulateGrad, an unshared gradient is stolen";
  through(node, w).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{2, 2}));
}

TEST(Autograd, AGradientSomethingElseHoldsIsCopied) {
  Tensor w = param({1, 2}, {2}, "w");
  auto node = std::make_shared<HandOverNode>(true, false);
  through(node, w).backward();
  EXPECT_NE(w.grad().data_ptr(), node->data);
  node->kept.fill_(5.0);
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{1, 1})) << "the holder's changes must not leak in";
}

TEST(Autograd, AGradientThatIsAViewOfALargerBufferIsCopied) {
  Tensor w = param({1, 2}, {2}, "w");
  auto node = std::make_shared<HandOverNode>(false, true);
  through(node, w).backward();
  EXPECT_NE(w.grad().data_ptr(), node->data);
  EXPECT_EQ(w.grad().storage()->nbytes(), w.nbytes()) << "the larger buffer is not kept alive by the gradient";
}

TEST(Autograd, OneGradientFlowingToTwoParametersIsNotSharedByThem) {
  // add's backward hands the same tensor to both inputs: at most one may take it.
  Tensor w = param({1, 2}, {2}, "w");
  Tensor v = param({3, 4}, {2}, "v");
  kernels::sum(kernels::add(w, v)).backward();
  EXPECT_NE(w.grad().data_ptr(), v.grad().data_ptr());
  kernels::sum(kernels::scale(w, 2)).backward();
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{3, 3}));
  EXPECT_EQ(v.grad().to_double_vector(), (std::vector<double>{1, 1}));
}

TEST(Autograd, AnAccumulatedGradientOfTheWrongShapeIsRefused) {
  Tensor w = param({1, 2}, {2}, "w");
  EXPECT_THROW(w.set_grad(Tensor::zeros({3}, DType::F64)), Error);
}

TEST(Autograd, PreSetGradientViewIsAccumulatedIntoInPlace) {
  // DDP's gradient_as_bucket_view: the grad is a view into a bucket before backward.
  Tensor w = param({1, 2}, {2}, "w");
  Tensor bucket = Tensor::zeros({4}, DType::F64);
  w.set_grad(bucket.view_range(1, {2}));
  kernels::sum(kernels::mul(w, w)).backward();
  EXPECT_EQ(bucket.to_double_vector(), (std::vector<double>{0, 2, 4, 0}));
}

TEST(Autograd, CastIsDifferentiableAcrossDtypes) {
  Tensor w = param({1.5, -2}, {2}, "w");
  Tensor y = kernels::sum(kernels::cast(kernels::scale(kernels::cast(w, DType::F32), 3), DType::F64));
  y.backward();
  EXPECT_EQ(w.grad().dtype(), DType::F64);
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{3, 3}));
}

TEST(Autograd, ReshapeIsDifferentiable) {
  Tensor w = param({1, 2, 3, 4, 5, 6}, {6}, "w");
  Tensor m = Tensor::from_vector(std::vector<double>{1, 0, 0, 1, 1, 1}, {3, 2}, DType::F64);
  kernels::sum(kernels::linear(w.reshape({3, 2}), m)).backward();
  EXPECT_EQ(w.grad().shape(), (Shape{6}));
}

TEST(Autograd, QueuedCallbacksRunOnceAfterEveryNodeAndHook) {
  Tensor w1 = param({1, 2}, {2}, "w1"), w2 = param({3, 4}, {2}, "w2");
  std::vector<std::string> events;
  bool queued = false;
  for (Tensor* w : {&w1, &w2}) {
    w->register_post_accumulate_grad_hook([&](Tensor& p) {
      events.push_back(p.name());
      if (!queued) {
        queued = true;
        queue_backward_callback([&] { events.push_back("end"); });
      }
    });
  }
  kernels::sum(kernels::add(kernels::mul(w1, w1), kernels::scale(w2, 2))).backward();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events.back(), "end");
  EXPECT_FALSE(in_backward());
}

TEST(Autograd, QueueingACallbackOutsideBackwardIsAnError) {
  EXPECT_THROW(queue_backward_callback([] {}), Error);
}

TEST(Autograd, CallbacksOfAFailedBackwardAreDropped) {
  Tensor w = param({1, 2}, {2}, "w");
  int runs = 0;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    queue_backward_callback([&] { ++runs; });
    TANDEM_FAIL("hook failed");
  });
  EXPECT_THROW(kernels::sum(kernels::mul(w, w)).backward(), Error);
  EXPECT_EQ(runs, 0);
  kernels::sum(kernels::scale(param({1}, {1}, "v"), 2)).backward();  // the next backward starts clean
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace tandem
