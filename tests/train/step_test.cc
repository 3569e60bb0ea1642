// TrainStep: gradient accumulation, clipping, the schedule, zero_grad and the
// observer's view of a step, each against a reference computed without it; and
// the capturable step (per-step scalars from device memory, which on the CPU
// is the same code reading host memory) against the default one, bit for bit.
#include "train/step.h"

#include <gtest/gtest.h>

#include "core/check.h"

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include <filesystem>
#include <map>
#include <memory>

#include "core/safetensors.h"
#include "kernels/cross_entropy.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace tandem::train {
namespace {

nn::TextClassifierConfig tiny_config() {
  nn::TextClassifierConfig c;
  c.vocab_size = 20;
  c.d_model = 8;
  c.n_heads = 2;
  c.num_layers = 1;
  c.dim_feedforward = 16;
  c.max_seq_len = 6;
  c.num_classes = 3;
  c.dropout = 0.0;  // the same function on every call, so steps can be compared
  return c;
}

// `rows` rows starting at row `first` of one fixed pseudo-random data set.
data::Batch make_batch(int64_t first, int64_t rows) {
  const int64_t S = tiny_config().max_seq_len;
  std::vector<int64_t> ids, labels;
  std::vector<double> mask;
  for (int64_t r = first; r < first + rows; ++r) {
    for (int64_t j = 0; j < S; ++j) {
      ids.push_back(1 + (r * 7 + j * 3) % 19);
      mask.push_back(j < 3 + r % 3 ? 1.0 : 0.0);  // rows of different lengths
    }
    labels.push_back(r % 3);
  }
  data::Batch b;
  b.ids = Tensor::from_vector(ids, {rows, S}, DType::I64);
  b.mask = Tensor::from_vector(mask, {rows, S}, DType::U8);
  b.labels = Tensor::from_vector(labels, {rows}, DType::I64);
  return b;
}

struct Trainee {
  nn::TextClassifier model{tiny_config(), 42};
  optim::SGD optimizer{model.parameters(), optim::SGDOptions{.lr = 0.5}};
  optim::GradScaler scaler{optim::GradScaler::for_compute_dtype(DType::F32)};
};

std::vector<double> flat_parameters(const nn::Module& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    std::vector<double> v = p.detach().to_double_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(TrainStep, AccumulatingMicroBatchesEqualsOneStepOnTheirUnion) {
  Trainee accumulated, whole;
  StepOptions two;
  two.accumulation_steps = 2;
  TrainStep a(accumulated.model, nullptr, accumulated.optimizer, accumulated.scaler, nullptr, {}, two);
  TrainStep b(whole.model, nullptr, whole.optimizer, whole.scaler, nullptr, {}, StepOptions{});
  int64_t next = 0;
  StepResult ra = a.run(0, [&] { return make_batch(4 * next++, 4); });
  StepResult rb = b.run(0, [] { return make_batch(0, 8); });

  EXPECT_EQ(ra.micro_batches, 2);
  EXPECT_EQ(ra.samples, 8);
  EXPECT_NEAR(ra.loss_sum.item() / 2, rb.loss_sum.item(), 1e-5);
  const std::vector<double> pa = flat_parameters(accumulated.model), pb = flat_parameters(whole.model);
  ASSERT_EQ(pa.size(), pb.size());
  const std::vector<double> start = flat_parameters(Trainee().model);
  double moved = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_NEAR(pa[i], pb[i], 1e-5) << "parameter element " << i;
    moved = std::max(moved, std::abs(pb[i] - start[i]));
  }
  EXPECT_GT(moved, 1e-3);  // the step did change the parameters
}

TEST(TrainStep, DrawsExactlyAccumulationStepsMicroBatchesPerStep) {
  Trainee s;
  StepOptions o;
  o.accumulation_steps = 3;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, o);
  int calls = 0;
  StepResult r = step.run(0, [&] { return make_batch(2 * calls++, 2); });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.micro_batches, 3);
  EXPECT_EQ(r.samples, 6);
}

TEST(TrainStep, ClassWeightsWeightTheLossAndTheUpdate) {
  // The reference: one weighted cross-entropy backward and SGD update by hand on an identical model.
  const Tensor w = Tensor::from_vector(std::vector<double>{0.5, 3.0, 1.25}, {3}, DType::F32);
  const data::Batch batch = make_batch(0, 6);
  Trainee ref;
  nn::ForwardContext ctx;
  Tensor ref_loss = kernels::cross_entropy(ref.model.forward(batch.ids, batch.mask, ctx), batch.labels, 0.0, w);
  ref_loss.backward();
  std::vector<double> expected = flat_parameters(ref.model), grads;
  for (const Tensor& p : ref.model.parameters()) {
    std::vector<double> g = p.grad().to_double_vector();
    grads.insert(grads.end(), g.begin(), g.end());
  }
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= 0.5 * grads[i];

  Trainee s;
  StepOptions o;
  o.class_weights = w;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, o);
  StepResult r = step.run(0, [&] { return batch; });
  EXPECT_NEAR(r.loss_sum.item(), ref_loss.item(), 1e-6);
  EXPECT_GT(std::abs(ref_loss.item() - kernels::cross_entropy(Trainee{}.model.forward(batch.ids, batch.mask, ctx),
                                                              batch.labels).item()),
            1e-3);  // the weights do change the loss
  const std::vector<double> after = flat_parameters(s.model);
  ASSERT_EQ(after.size(), expected.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], expected[i], 1e-6) << i;
}

TEST(TrainStep, ClipsTheGradientAndReportsItsNormBeforeClipping) {
  // The reference norm: one plain backward on an identical model.
  Trainee ref;
  const data::Batch batch = make_batch(0, 4);
  nn::ForwardContext ctx;
  kernels::cross_entropy(ref.model.forward(batch.ids, batch.mask, ctx), batch.labels).backward();
  double sq = 0;
  for (const Tensor& p : ref.model.parameters())
    for (double g : p.grad().to_double_vector()) sq += g * g;
  const double norm = std::sqrt(sq);

  Trainee s;
  const std::vector<double> before = flat_parameters(s.model);
  StepOptions o;
  o.max_grad_norm = 1e-3;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, o);
  StepResult r = step.run(0, [&] { return batch; });
  ASSERT_TRUE(r.grad_norm.defined());
  EXPECT_NEAR(r.grad_norm.item(), norm, 1e-4 * norm);
  ASSERT_GT(norm, o.max_grad_norm);
  // SGD moves the parameters by lr times the clipped gradient, whose norm is max_grad_norm.
  const std::vector<double> after = flat_parameters(s.model);
  double moved = 0;
  for (size_t i = 0; i < after.size(); ++i) moved += (after[i] - before[i]) * (after[i] - before[i]);
  EXPECT_NEAR(std::sqrt(moved), 0.5 * o.max_grad_norm, 1e-3 * 0.5 * o.max_grad_norm);
}

TEST(TrainStep, WithoutClippingReportsNoNorm) {
  Trainee s;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, StepOptions{});
  EXPECT_FALSE(step.run(0, [] { return make_batch(0, 2); }).grad_norm.defined());
}

TEST(TrainStep, AdvancesTheScheduleOncePerStep) {
  Trainee s;
  optim::ScheduleConfig sc;
  sc.kind = optim::ScheduleKind::Linear;
  sc.num_training_steps = 4;
  optim::LRScheduler schedule(s.optimizer, sc);
  StepOptions o;
  o.accumulation_steps = 2;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, &schedule, {}, o);
  step.run(0, [] { return make_batch(0, 2); });
  step.run(1, [] { return make_batch(2, 2); });
  EXPECT_EQ(schedule.last_step(), 2);
  EXPECT_NEAR(s.optimizer.lr(0), 0.5 * 2.0 / 4.0, 1e-12);  // linear decay from 0.5 to 0 over 4 steps
}

TEST(TrainStep, LeavesNoGradientsBehind) {
  Trainee s;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, StepOptions{});
  step.run(0, [] { return make_batch(0, 2); });
  for (const auto& [name, p] : s.model.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}

// Records what a step reports, as text.
class Recorder final : public StepObserver {
 public:
  void enter(profile::Phase phase) override { events.emplace_back(profile::phase_name(phase)); }
  void on_batch(const data::Batch& b, bool synchronised) override {
    events.push_back("batch " + std::to_string(b.labels.size(0)) + (synchronised ? " sync" : ""));
  }
  std::vector<std::string> events;
};

TEST(TrainStep, TellsItsObserverEachPhaseAndBatchInOrder) {
  Trainee s;
  StepOptions o;
  o.accumulation_steps = 2;
  TrainStep step(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, o);
  Recorder rec;
  step.run(0, [] { return make_batch(0, 3); }, &rec);
  const std::vector<std::string> expected = {"data_wait",        "batch 3", "forward", "backward_compute", "data_wait",
                                             "batch 3",          "forward", "backward_compute", "optimizer"};
  EXPECT_EQ(rec.events, expected);
}

TEST(TrainStep, RejectsAnAccumulationBelowOne) {
  Trainee s;
  StepOptions o;
  o.accumulation_steps = 0;
  EXPECT_THROW(TrainStep(s.model, nullptr, s.optimizer, s.scaler, nullptr, {}, o), Error);
}


// --- the capturable step ---------------------------------------------------------

// A training run of `steps` steps: dropout on, AdamW (decay on matrices only) or SGD with
// momentum, a linear schedule with warm-up (the lr changes every step), clipping, and
// optionally fp16 compute with a loss scaler tuned so that some steps overflow and are skipped.
struct RunSetup {
  bool capturable = false;
  bool sgd = false;
  bool fp16 = false;
  int64_t accumulation_steps = 1;
};

struct Training {
  explicit Training(const RunSetup& setup) : model(config(), 42), scaler(make_scaler(setup.fp16)) {
    std::vector<Tensor> decay, no_decay;
    for (const auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    if (setup.sgd) {
      optimizer = std::make_unique<optim::SGD>(std::vector<optim::SGD::ParamGroup>{
          {decay, {.lr = 0.2, .momentum = 0.9, .weight_decay = 0.01}}, {no_decay, {.lr = 0.1, .momentum = 0.9}}});
    } else {
      optimizer = std::make_unique<optim::AdamW>(std::vector<optim::AdamW::ParamGroup>{
          {decay, {.lr = 2e-2, .weight_decay = 0.1}}, {no_decay, {.lr = 1e-2, .weight_decay = 0.0}}});
    }
    optim::ScheduleConfig sc;
    sc.kind = optim::ScheduleKind::Linear;
    sc.num_training_steps = 10;
    sc.warmup_steps = 3;
    schedule = std::make_unique<optim::LRScheduler>(*optimizer, sc);
    StepOptions o;
    o.max_grad_norm = 0.5;
    o.capturable = setup.capturable;
    o.accumulation_steps = setup.accumulation_steps;
    nn::ForwardContext ctx;
    ctx.seed = 7;
    ctx.compute_dtype = setup.fp16 ? DType::F16 : DType::F32;
    step = std::make_unique<TrainStep>(model, nullptr, *optimizer, scaler, schedule.get(), ctx, o);
  }

  static nn::TextClassifierConfig config() {
    nn::TextClassifierConfig c = tiny_config();
    c.dropout = 0.2;
    return c;
  }
  // Scale 2^40 overflows fp16 gradients; the backoff brings it to 2^10, which does not; two
  // clean steps grow it back to 2^40: every third step is skipped.
  static optim::GradScaler make_scaler(bool fp16) {
    optim::GradScalerOptions o;
    o.init_scale = std::ldexp(1.0, 40);
    o.backoff_factor = std::ldexp(1.0, -30);
    o.growth_factor = std::ldexp(1.0, 30);
    o.growth_interval = 2;
    return optim::GradScaler::for_compute_dtype(fp16 ? DType::F16 : DType::F32, o);
  }

  void train(int64_t steps, int64_t first_step = 0) {
    for (int64_t k = first_step; k < first_step + steps; ++k) {
      int64_t micro = 0;
      StepResult r = step->run(k, [&] { return make_batch(3 * k + 40 * micro++, 4); });
      losses.push_back(r.loss_sum.item());
      grad_norms.push_back(r.grad_norm.item());
    }
  }

  nn::TextClassifier model;
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::GradScaler scaler;
  std::unique_ptr<optim::LRScheduler> schedule;
  std::unique_ptr<TrainStep> step;
  std::vector<double> losses, grad_norms;
};

// Every optimizer state tensor, by name, as doubles (exact for f32).
// The values' bit patterns: equal also where both are the same NaN (the norm of a skipped fp16 step).
std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out;
  for (double x : v) out.push_back(std::bit_cast<uint64_t>(x));
  return out;
}

std::map<std::string, std::vector<double>> state_values(const optim::Optimizer& o) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : o.state_dict()) out[name] = t.to_double_vector();
  return out;
}

void expect_identical_training(const RunSetup& base, int64_t steps) {
  RunSetup capturable = base;
  capturable.capturable = true;
  Training host(base), device(capturable);
  host.train(steps);
  device.train(steps);
  EXPECT_EQ(device.losses, host.losses);
  EXPECT_EQ(bits(device.grad_norms), bits(host.grad_norms));
  EXPECT_EQ(flat_parameters(device.model), flat_parameters(host.model));
  const auto hs = state_values(*host.optimizer), ds = state_values(*device.optimizer);
  ASSERT_FALSE(hs.empty());
  EXPECT_EQ(ds, hs);
}

TEST(CapturableTrainStep, AdamWTrainsBitForBitAsTheHostScalarStep) {
  expect_identical_training(RunSetup{}, 6);
}

TEST(CapturableTrainStep, SgdWithMomentumTrainsBitForBitAsTheHostScalarStep) {
  expect_identical_training(RunSetup{.sgd = true}, 6);
}

TEST(CapturableTrainStep, GradientAccumulationTrainsBitForBitAsTheHostScalarStep) {
  expect_identical_training(RunSetup{.accumulation_steps = 3}, 4);
}

TEST(CapturableTrainStep, Fp16SkippedStepsAreSkippedAndNotCountedAsOnTheHostScalarStep) {
  expect_identical_training(RunSetup{.fp16 = true}, 6);
  Training run(RunSetup{.capturable = true, .fp16 = true});
  run.train(6);
  // Steps 0 and 3 overflow: AdamW's step counts say 4, not 6, as without capturable.
  for (const auto& [name, t] : run.optimizer->state_dict())
    if (name.ends_with(".step")) {
      EXPECT_EQ(t.item(), 4.0) << name;
    }
}

TEST(CapturableTrainStep, DropoutFollowsTheStepCountInDeviceMemory) {
  // Same model, same batch, different step numbers: different masks, so different losses.
  Training a(RunSetup{.capturable = true}), b(RunSetup{.capturable = true});
  const double la = a.step->run(0, [] { return make_batch(0, 4); }).loss_sum.item();
  const double lb = b.step->run(1, [] { return make_batch(0, 4); }).loss_sum.item();
  EXPECT_NE(la, lb);
}

TEST(CapturableTrainStep, CheckpointsRoundTripBetweenCapturableAndHostScalarSteps) {
  // 3 steps capturable, saved in the checkpoint's format, loaded into a host-scalar run that
  // does 3 more (and the other way round): the same as 6 uninterrupted steps.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "tandem_capturable_checkpoint_test";
  std::filesystem::create_directories(dir);
  for (bool first_capturable : {true, false}) {
    Training whole(RunSetup{});
    whole.train(6);

    Training first(RunSetup{.capturable = first_capturable});
    first.train(3);
    NamedTensors opt;
    for (const auto& [name, t] : first.optimizer->state_dict()) opt.tensors.emplace_back(name, t);
    save_safetensors((dir / "model.safetensors").string(), first.model.state_dict());
    save_safetensors((dir / "optimizer.safetensors").string(), opt);

    Training second(RunSetup{.capturable = !first_capturable});
    second.model.load_state_dict(load_safetensors((dir / "model.safetensors").string()));
    optim::Optimizer::StateDict loaded;
    for (const auto& [name, t] : load_safetensors((dir / "optimizer.safetensors").string()).tensors) {
      if (name.ends_with(".step")) {
        EXPECT_EQ(t.dim(), 0) << name << ": PyTorch's 0-dim f32 step count";
      }
      loaded[name] = t;
    }
    second.optimizer->load_state_dict(loaded);
    second.schedule->set_step(3);
    second.train(3, 3);

    EXPECT_EQ(flat_parameters(second.model), flat_parameters(whole.model)) << "first capturable: " << first_capturable;
    EXPECT_EQ(state_values(*second.optimizer), state_values(*whole.optimizer));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::train
