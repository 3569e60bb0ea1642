// What every optimizer promises beyond its formulas: parameter validation,
// skipping parameters without gradients, zero_grad, a device-side skip flag,
// and checkpoint state (export, resume, validation of what is loaded).
#include <gtest/gtest.h>

#include "core/check.h"
#include "core/thread_pool.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "optim/update_math.h"
#include "tests/testing/gradcheck.h"

namespace tandem::optim {
namespace {

using testing::random_tensor;

Tensor param(const Shape& shape, uint64_t seed) {
  return random_tensor(shape, seed, DType::F32).set_requires_grad(true);
}

void set_grads(std::vector<Tensor> params, uint64_t seed) {
  for (size_t i = 0; i < params.size(); ++i)
    params[i].set_grad(random_tensor(params[i].shape(), seed * 100 + i, DType::F32));
}

std::vector<std::vector<double>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(t.to_double_vector());
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

TEST(Optimizer, RejectsParametersItCannotUpdate) {
  Tensor p = param({2}, 1);
  EXPECT_THROW(AdamW(std::vector<Tensor>{}), Error);
  EXPECT_THROW(AdamW({p, p}), Error);                                                // twice
  EXPECT_THROW(AdamW({{{p}, {}}, {{p}, {}}}), Error);                               // in two groups
  EXPECT_THROW(AdamW({Tensor::zeros({2})}), Error);                                  // no requires_grad
  EXPECT_THROW(AdamW({Tensor::zeros({2}, DType::F64).set_requires_grad(true)}), Error);  // not f32 master weights
  EXPECT_THROW(AdamW({p}, {.betas = {0.9, 1.0}}), Error);
  EXPECT_THROW(AdamW({p}, {.lr = -1.0}), Error);
  EXPECT_THROW(SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(SGD({p}, {.nesterov = true}), Error);
}

TEST(Optimizer, ParametersWithoutGradientsAreNotTouched) {
  std::vector<Tensor> ps = {param({3}, 1), param({4}, 2)};
  AdamW opt(ps);
  ps[0].set_grad(random_tensor({3}, 3, DType::F32));
  const std::vector<double> untouched = ps[1].to_double_vector();
  opt.step();
  EXPECT_EQ(ps[1].to_double_vector(), untouched);
  const Optimizer::StateDict state = opt.state_dict();
  EXPECT_TRUE(state.count("state.0.exp_avg"));
  EXPECT_FALSE(state.count("state.1.exp_avg"));
  EXPECT_EQ(state.at("state.0.step").item(), 1.0);
}

TEST(Optimizer, ZeroGradDropsOrZeroesGradients) {
  Tensor p = param({3}, 1);
  SGD opt({p});
  p.set_grad(Tensor::full({3}, 2.0));
  Tensor g = p.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(p.grad().is_same(g));
  EXPECT_EQ(g.to_double_vector(), (std::vector<double>{0, 0, 0}));
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, NonZeroFoundInfMakesTheStepANoOp) {
  std::vector<Tensor> ps = {param({5}, 1)};
  AdamW opt(ps);
  set_grads(ps, 2);
  opt.step();
  const auto before = values(ps);
  const auto state_before = opt.state_dict().at("state.0.exp_avg_sq").to_double_vector();
  set_grads(ps, 3);
  opt.step(Tensor::full({}, 1.0));
  EXPECT_EQ(values(ps), before);
  EXPECT_EQ(opt.state_dict().at("state.0.exp_avg_sq").to_double_vector(), state_before);
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 1.0);
  opt.step(Tensor::zeros({}));  // zero: an ordinary step
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 2.0);
  EXPECT_THROW(opt.step(Tensor::zeros({2})), Error);
}

TEST(Optimizer, CapturableUpdatesTakeTheLrFromMemoryNotTheHostValue) {
  // What a capturable optimizer hands its kernels (optim/update_math.h): lr_ptr wins over lr.
  const double in_memory = 0.25;
  const AdamWScalars a = adamw_scalars(AdamWHyper{.lr = 1.0, .weight_decay = 0.1, .lr_ptr = &in_memory}, 3.0);
  const AdamWScalars b = adamw_scalars(AdamWHyper{.lr = 0.25, .weight_decay = 0.1}, 3.0);
  EXPECT_EQ(a.decay, b.decay);
  EXPECT_EQ(a.neg_step_size, b.neg_step_size);
  EXPECT_NE(a.neg_step_size, adamw_scalars(AdamWHyper{.lr = 1.0, .weight_decay = 0.1}, 3.0).neg_step_size);
  EXPECT_EQ(sgd_scalars(SgdHyper{.lr = 1.0, .lr_ptr = &in_memory}).neg_lr, sgd_scalars(SgdHyper{.lr = 0.25}).neg_lr);
}

TEST(Optimizer, AdamWGivesTheSameBitsAtAnyThreadCount) {
  // The CPU update is split over the thread pool; every element's update is its own.
  const int threads = intra_op_threads();
  std::vector<std::vector<std::vector<double>>> results;
  for (int t : {1, 2, 3}) {
    set_intra_op_threads(t);
    std::vector<Tensor> ps = {param({300001}, 1), param({7}, 2)};
    AdamW opt(ps, AdamWOptions{.lr = 1e-2});
    for (uint64_t step = 1; step <= 3; ++step) {
      set_grads(ps, step);
      opt.step();
    }
    results.push_back(values(ps));
  }
  set_intra_op_threads(threads);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(Optimizer, SetLrChangesOneGroup) {
  Tensor a = param({2}, 1), b = param({2}, 2);
  SGD opt({{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.2}}});
  opt.set_lr(1, 0.5);
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_EQ(opt.lr(1), 0.5);
  EXPECT_THROW(opt.set_lr(2, 0.1), Error);
}

// Three steps, a checkpoint, two more steps in a fresh optimizer: the same
// bits as five steps without interruption.
template <class Opt, class Options>
void check_resume(Options options) {
  std::vector<Tensor> ps = {param({4, 3}, 1), param({7}, 2)};
  std::vector<Tensor> ps_resumed = clones(ps);
  Opt opt(ps, options);
  for (uint64_t k = 0; k < 3; ++k) {
    set_grads(ps, k);
    opt.step();
  }
  Optimizer::StateDict saved;
  for (const auto& [key, t] : opt.state_dict()) saved[key] = t.clone();
  for (size_t i = 0; i < ps.size(); ++i) ps_resumed[i].detach().copy_(ps[i]);

  Opt resumed(ps_resumed, options);
  resumed.load_state_dict(saved);
  for (uint64_t k = 3; k < 5; ++k) {
    set_grads(ps, k);
    set_grads(ps_resumed, k);
    opt.step();
    resumed.step();
  }
  EXPECT_EQ(values(ps_resumed), values(ps));
}

TEST(Optimizer, AdamWResumesExactlyFromItsStateDict) { check_resume<AdamW>(AdamWOptions{.lr = 1e-2}); }

TEST(Optimizer, SgdResumesExactlyFromItsStateDict) {
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
}

TEST(Optimizer, StateDictNamesFollowPyTorch) {
  Tensor a = param({2}, 1), b = param({3}, 2);
  SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_grads({a, b}, 1);
  opt.step();
  std::vector<std::string> keys;
  for (const auto& [k, t] : opt.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"state.0.momentum_buffer", "state.0.step", "state.1.momentum_buffer",
                                            "state.1.step"}));
}

TEST(Optimizer, LoadStateDictRejectsWhatDoesNotFit) {
  Tensor a = param({2}, 1);
  AdamW opt({a});
  auto load = [&](Optimizer::StateDict s) { opt.load_state_dict(s); };
  const Tensor step = Tensor::full({}, 3.0), m = Tensor::zeros({2});
  EXPECT_THROW(load({{"state.0.step", step}, {"state.0.exp_avg", m}}), Error);  // exp_avg_sq missing
  EXPECT_THROW(load({{"state.1.step", step}}), Error);                           // no parameter 1
  EXPECT_THROW(load({{"state.x.step", step}}), Error);
  EXPECT_THROW(load({{"exp_avg", m}}), Error);
  EXPECT_THROW(load({{"state.0.momentum_buffer", m}}), Error);  // not AdamW state
  EXPECT_THROW(load({{"state.0.step", step}, {"state.0.exp_avg", Tensor::zeros({3})},
                     {"state.0.exp_avg_sq", m}}),
               Error);  // wrong shape
  EXPECT_TRUE(opt.state_dict().empty());  // nothing was half-loaded
  load({{"state.0.step", step}, {"state.0.exp_avg", m}, {"state.0.exp_avg_sq", m}});
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 3.0);
}

}  // namespace
}  // namespace tandem::optim
