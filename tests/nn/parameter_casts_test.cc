// How a forward casts its f32 parameters to the compute dtype
// (TANDEM_PARAMETER_CASTS, kernels/parameter_casts.h; nn/parameter_casts.h):
// the switch's parsing; kernels::cast_many against kernels::cast, tensor by
// tensor, for its values (bit for bit) and its gradients (bit for bit: each
// slice has its own CastBackward); and the classifier under `batched` against
// `each`: one cast_many op in place of the per-parameter casts, and the same
// logits and parameter gradients, bit for bit, in every compute dtype, and the
// gradients ready in the same order (DDP's buckets' order). A copy
// kept past its forward would give the next forward stale weights: a test
// changes the weights between two forwards. The GPU kernel's per-thread code
// runs here over every thread of its planned launches; on a GPU the same
// comparisons, with lists longer than one launch takes and views at odd offsets.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/op_scope.h"
#include "core/tensor.h"
#include "kernels/cuda/cast_many_plan.h"
#include "kernels/elementwise.h"
#include "kernels/parameter_casts.h"
#include "kernels/reduce.h"
#include "nn/parameter_casts.h"
#include "nn/transformer.h"
#include "tests/nn/small_classifier.h"
#include "tests/testing/errors.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/gradcheck.h"
#include "tests/testing/require_gpu.h"

namespace tandem::nn {
namespace {

using kernels::ParameterCastMode;
using testing::random_tensor;

TEST(ParameterCastsSwitch, IsEachUnlessSetAndNamesTheVariableAndValueOnABadValue) {
  EXPECT_EQ(kernels::parse_parameter_casts(nullptr), ParameterCastMode::Each);
  EXPECT_EQ(kernels::parse_parameter_casts(""), ParameterCastMode::Each);
  EXPECT_EQ(kernels::parse_parameter_casts("each"), ParameterCastMode::Each);
  EXPECT_EQ(kernels::parse_parameter_casts("batched"), ParameterCastMode::Batched);
  EXPECT_TRUE(
      testing::rejects_naming_variable_and_value(kernels::parse_parameter_casts, "TANDEM_PARAMETER_CASTS", "all"));
  EXPECT_STREQ(kernels::parameter_casts_name(ParameterCastMode::Batched), "batched");
}

// f32 tensors of awkward sizes: a scalar, empty, odd, one over a vector step, and several
// of the GPU kernel's 2048-element blocks. With odd_views, each is a view one element into
// a larger tensor (not 16-byte aligned).
std::vector<Tensor> awkward_tensors(Device device, int copies, bool odd_views, bool requires_grad) {
  const std::vector<Shape> shapes = {{}, {0}, {7}, {9}, {3, 5}, {4, 8}, {2, 2500}, {8}};
  std::vector<Tensor> out;
  uint64_t seed = 100;
  for (int c = 0; c < copies; ++c)
    for (const Shape& s : shapes) {
      Tensor t;
      if (odd_views) {
        const Tensor base = random_tensor({shape_numel(s) + 1}, seed++, DType::F32, device);
        t = base.view_range(1, s).detach();
      } else {
        t = random_tensor(s, seed++, DType::F32, device);
      }
      if (requires_grad) t.set_requires_grad(true);
      out.push_back(t);
    }
  return out;
}

void expect_cast_many_gives_each_casts_bits(Device device, int copies, bool odd_views) {
  for (DType t : {DType::BF16, DType::F16, DType::F64}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + (odd_views ? ", odd views" : ""));
    const std::vector<Tensor> xs = awkward_tensors(device, copies, odd_views, false);
    const std::vector<Tensor> got = kernels::cast_many(xs, t);
    ASSERT_EQ(got.size(), xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_EQ(got[i].dtype(), t);
      EXPECT_EQ(got[i].shape(), xs[i].shape());
      EXPECT_EQ(got[i].to_double_vector(), kernels::cast(xs[i], t).to_double_vector()) << "tensor " << i;
      EXPECT_EQ(got[i].storage(), got[0].storage()) << "one buffer";
      EXPECT_EQ(got[i].offset_bytes() % 16, 0u) << "tensor " << i << " starts 16-byte aligned in it";
    }
  }
}

TEST(CastMany, GivesEachCastsBitsInSlicesOfOneBuffer) {
  expect_cast_many_gives_each_casts_bits(Device::cpu(), 1, false);
  expect_cast_many_gives_each_casts_bits(Device::cpu(), 1, true);
}

TEST(CastMany, OnTheGpuGivesEachCastsBitsAcrossSeveralLaunches) {
  TANDEM_REQUIRE_GPU();
  // 14 copies of 8 shapes: 98 tensors that are not empty, over the 96 one launch takes.
  expect_cast_many_gives_each_casts_bits(Device::cuda(0), 14, false);
  expect_cast_many_gives_each_casts_bits(Device::cuda(0), 14, true);
}

// The GPU kernel's code (kernels/cuda/cast_many_plan.h) run here: every thread of every block of
// every planned launch, into slices first filled with a value no cast gives.
template <class D>
void expect_emulated_launches_give_each_casts_bits(DType t, bool odd_views) {
  SCOPED_TRACE(std::string(dtype_name(t)) + (odd_views ? ", odd views" : ""));
  const std::vector<Tensor> xs = awkward_tensors(Device::cpu(), 14, odd_views, false);
  std::vector<Tensor> outs = kernels::cast_many(xs, t);  // the slices' layout
  std::vector<kernels::cast_many_plan::Entry> entries;
  for (size_t i = 0; i < xs.size(); ++i) {
    outs[i].fill_(1000.0);
    entries.push_back({xs[i].data<float>(), outs[i].data_ptr(), xs[i].numel()});
  }
  int launches = 0;
  kernels::cast_many_plan::plan_launches(entries, [&](const kernels::cast_many_plan::CastList& list) {
    ++launches;
    for (int b = 0; b < list.first_block[list.count]; ++b)
      for (int thread = 0; thread < kernels::cast_many_plan::kThreads; ++thread)
        kernels::cast_many_plan::convert_thread<D>(list, b, thread);
  });
  EXPECT_EQ(launches, 2) << "98 tensors that are not empty, 96 a launch";
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_EQ(outs[i].to_double_vector(), kernels::cast(xs[i], t).to_double_vector()) << "tensor " << i;
}

TEST(EmulatedCastMany, EveryThreadOfThePlannedLaunchesGivesEachCastsBits) {
  for (bool odd_views : {false, true}) {
    expect_emulated_launches_give_each_casts_bits<BFloat16>(DType::BF16, odd_views);
    expect_emulated_launches_give_each_casts_bits<Half>(DType::F16, odd_views);
  }
}

// Gradients of sum_i <cast(out_i, f32), r_i> for out = cast_many(xs), each recorded as its tensor's
// cast, against out_i = cast(xs[i]).
void expect_cast_many_gradients_are_each_casts(Device device) {
  for (DType t : {DType::BF16, DType::F16, DType::F64}) {
    SCOPED_TRACE(dtype_name(t));
    auto grads = [&](bool batched) {
      std::vector<Tensor> xs = awkward_tensors(device, 1, false, true);
      xs[3] = xs[3].detach();  // one that needs no gradient
      std::vector<Tensor> outs;
      if (batched) {
        outs = kernels::cast_many(xs, t);
        for (size_t i = 0; i < xs.size(); ++i) {
          EXPECT_FALSE(outs[i].requires_grad()) << "no history until record_cast";
          kernels::record_cast(xs[i], outs[i]);
        }
      } else {
        for (const Tensor& x : xs) outs.push_back(kernels::cast(x, t));
      }
      EXPECT_FALSE(outs[3].requires_grad());
      Tensor loss = Tensor::zeros({}, DType::F32, device);
      for (size_t i = 0; i < outs.size(); ++i) {
        if (i == 3) continue;
        const Tensor r = random_tensor(xs[i].shape(), 900 + i, DType::F32, device);
        loss = kernels::add(loss, kernels::sum(kernels::mul(kernels::cast(outs[i], DType::F32), r)));
      }
      loss.backward();
      std::vector<std::vector<double>> g;
      for (size_t i = 0; i < xs.size(); ++i)
        g.push_back(i == 3 ? std::vector<double>{} : xs[i].grad().to_double_vector());
      return g;
    };
    EXPECT_EQ(grads(true), grads(false));
  }
}

TEST(CastMany, EachSliceCarriesItsOwnGradientBackToItsTensor) {
  expect_cast_many_gradients_are_each_casts(Device::cpu());
}

TEST(CastMany, OnTheGpuEachSliceCarriesItsOwnGradientBackToItsTensor) {
  TANDEM_REQUIRE_GPU();
  expect_cast_many_gradients_are_each_casts(Device::cuda(0));
}

TEST(CastMany, RecordCastRefusesATensorWithHistoryOrOfAnotherShape) {
  Tensor x = random_tensor({4}, 1, DType::F32).set_requires_grad(true);
  const Tensor y = kernels::cast(x, DType::BF16);  // has history already
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::record_cast(x, y); }, "is not a new tensor"));
  const Tensor z = Tensor::zeros({5}, DType::BF16);
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::record_cast(x, z); }, "is not a new tensor"));
}

TEST(CastMany, RejectsAListOfMixedDtypesNamingTheTensor) {
  Tensor a = random_tensor({3}, 1, DType::F32);
  Tensor b = random_tensor({4}, 2, DType::F64);
  b.set_name("head.bias");
  EXPECT_TRUE(testing::throws_error_containing([&] { kernels::cast_many({a, b}, DType::BF16); }, "head.bias"));
  EXPECT_TRUE(kernels::cast_many({}, DType::BF16).empty());
}

struct ClassifierRun {
  std::vector<double> logits;
  std::vector<std::pair<std::string, std::vector<double>>> grads;
};

// A training-mode forward (dropout, padding) and backward of `model` in `compute`.
ClassifierRun run_classifier(const TextClassifier& model, DType compute, Device device, uint64_t step = 3) {
  ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = 7;
  ctx.step = step;
  const testing::Batch batch = testing::padded_batch(device);
  Tensor logits = model.forward(batch.ids, batch.mask, ctx);
  EXPECT_EQ(ctx.casts, nullptr) << "the copies do not outlive the forward";
  const Tensor r = random_tensor({2, 3}, 5, DType::F32, device);
  Tensor loss = kernels::sum(kernels::mul(kernels::cast(logits, DType::F32), r));
  loss.backward();
  ClassifierRun out{logits.to_double_vector(), {}};
  for (const auto& [name, p] : model.named_parameters()) {
    out.grads.emplace_back(name, p.grad().to_double_vector());
    Tensor mutable_p = p;
    mutable_p.set_grad(Tensor());
  }
  return out;
}

void expect_batched_classifier_is_each_casts(Device device) {
  for (DType compute : {DType::BF16, DType::F16, DType::F64, DType::F32}) {
    SCOPED_TRACE(std::string(dtype_name(compute)) + " on " + device.str());
    TextClassifier model(testing::small_classifier(), 21);
    model.to(device);
    model.train(true);
    std::optional<ClassifierRun> each, batched;
    {
      const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, ParameterCastMode::Each);
      each = run_classifier(model, compute, device);
    }
    {
      const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, ParameterCastMode::Batched);
      batched = run_classifier(model, compute, device);
    }
    EXPECT_EQ(batched->logits, each->logits);
    ASSERT_EQ(batched->grads.size(), each->grads.size());
    for (size_t i = 0; i < each->grads.size(); ++i)
      EXPECT_EQ(batched->grads[i].second, each->grads[i].second) << each->grads[i].first;
  }
}

TEST(ParameterCastsBatched, ClassifierGivesTheEachCastLogitsAndGradientsBitForBit) {
  expect_batched_classifier_is_each_casts(Device::cpu());
}

TEST(ParameterCastsBatched, OnTheGpuClassifierGivesTheEachCastLogitsAndGradientsBitForBit) {
  TANDEM_REQUIRE_GPU();
  expect_batched_classifier_is_each_casts(Device::cuda(0));
}

// Counts the outermost op scopes of a forward by name.
class OpCounter final : public OpObserver {
 public:
  void begin(std::string_view name, bool backward) override {
    if (!backward) ++counts[std::string(name)];
  }
  void end() noexcept override {}
  std::map<std::string, int> counts;
};

std::map<std::string, int> forward_ops(const TextClassifier& model, ParameterCastMode how) {
  const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, how);
  const NoGradGuard no_grad;
  ForwardContext ctx;
  ctx.compute_dtype = DType::BF16;
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  const Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 1, 1}, {1, 4}, DType::U8);
  OpCounter counter;
  set_op_observer(&counter);
  model.forward(ids, mask, ctx);
  set_op_observer(nullptr);
  return counter.counts;
}

TEST(ParameterCastsBatched, ClassifierCastsEveryLinearParameterInOneOp) {
  TextClassifier model(testing::small_classifier(), 21);
  const int cast_parameters = static_cast<int>(model.cast_parameters().size());
  // Per layer: in_proj, out_proj, linear1 and linear2, a weight and a bias each; and the head's two.
  EXPECT_EQ(cast_parameters, 2 * 8 + 2);
  std::map<std::string, int> each = forward_ops(model, ParameterCastMode::Each);
  std::map<std::string, int> batched = forward_ops(model, ParameterCastMode::Batched);
  EXPECT_EQ(each["cast_many"], 0);
  EXPECT_EQ(batched["cast_many"], 1);
  EXPECT_EQ(each["cast"] - batched["cast"], cast_parameters) << "only the parameters' casts are batched";
}

TEST(ParameterCastsBatched, ASecondForwardCastsTheWeightsAsTheyAreThen) {
  const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, ParameterCastMode::Batched);
  TextClassifier model(testing::small_classifier(), 21);
  model.train(true);
  const ClassifierRun before = run_classifier(model, DType::BF16, Device::cpu());
  {
    const NoGradGuard no_grad;
    for (Tensor p : model.cast_parameters()) p.copy_(kernels::scale(p, 1.5));  // as an optimizer step would
  }
  const ClassifierRun after = run_classifier(model, DType::BF16, Device::cpu());
  ClassifierRun each;
  {
    const testing::ForcedSwitch each_cast(kernels::set_parameter_casts_for_testing, ParameterCastMode::Each);
    each = run_classifier(model, DType::BF16, Device::cpu());
  }
  EXPECT_NE(after.logits, before.logits);
  EXPECT_EQ(after.logits, each.logits);
}

TEST(ParameterCastsBatched, AScopeInsideAnotherKeepsTheOuterCopies) {
  const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, ParameterCastMode::Batched);
  TextClassifier model(testing::small_classifier(), 21);
  ForwardContext ctx;
  ctx.compute_dtype = DType::BF16;
  const ParameterCastScope outer(model, ctx);
  ParameterCasts* copies = ctx.casts;
  ASSERT_NE(copies, nullptr);
  {
    const ParameterCastScope inner(model, ctx);
    EXPECT_EQ(ctx.casts, copies);
  }
  EXPECT_EQ(ctx.casts, copies);
  const Tensor w = model.cast_parameters().front();
  const Tensor* copy = ctx.casts->use(w);
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(as_compute(w, ctx).is_same(*copy));
}

// The names of the parameters in the order their gradients became complete in one backward (what
// DDP's buckets see: each hook is where a bucket learns a gradient is ready).
std::vector<std::string> gradient_order(const TextClassifier& model, ParameterCastMode how) {
  const testing::ForcedSwitch forced(kernels::set_parameter_casts_for_testing, how);
  std::vector<std::string> order;
  std::vector<std::pair<Tensor, uint64_t>> hooks;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor param = p;
    hooks.emplace_back(param, param.register_post_accumulate_grad_hook([&order, name = name](Tensor&) {
      order.push_back(name);
    }));
  }
  run_classifier(model, DType::BF16, Device::cpu());
  for (auto& [param, handle] : hooks) param.remove_post_accumulate_grad_hook(handle);
  return order;
}

TEST(ParameterCastsBatched, ParameterGradientsAreReadyInTheOrderOfEachCast) {
  // The casts' backward nodes are made at each parameter's first use, not all at the forward's
  // start: made there, they would run after every other node, every gradient would be ready only
  // at the backward's end, and DDP could overlap no all-reduce with the backward.
  TextClassifier model(testing::small_classifier(), 21);
  model.train(true);
  const std::vector<std::string> each = gradient_order(model, ParameterCastMode::Each);
  ASSERT_EQ(each.size(), model.named_parameters().size());
  EXPECT_EQ(gradient_order(model, ParameterCastMode::Batched), each);
}

}  // namespace
}  // namespace tandem::nn
