// TrainStep: gradient accumulation, clipping, the schedule, zero_grad and the
// observer's view of a step, each against a reference computed without it; and
// the capturable step (per-step scalars from device memory, which on the CPU
// is the same code reading host memory) against the default one, bit for bit.
#include "train/step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/safetensors.h"
#include "kernels/cross_entropy.h"
#include "optim/sgd.h"
#include "tests/train/training_fixture.h"

namespace tandem::train {
namespace {

using testing::bits;
using testing::flat_parameters;
using testing::state_values;

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

data::Batch make_batch(int64_t first, int64_t rows) { return testing::patterned_batch(tiny_config(), first, rows); }

struct Trainee {
  nn::TextClassifier model{tiny_config(), 42};
  optim::SGD optimizer{model.parameters(), optim::SGDOptions{.lr = 0.5}};
  optim::GradScaler scaler{optim::GradScaler::for_compute_dtype(DType::F32)};
};

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
// The capturable tests' run: the tiny model with dropout on, so that the step count matters.
testing::TrainingSetup setup(bool capturable = false) {
  testing::TrainingSetup t;
  t.model = tiny_config();
  t.model.dropout = 0.2;
  t.capturable = capturable;
  return t;
}

// Steps first_step .. first_step + steps - 1, each micro-batch 4 rows.
void train(testing::Training& run, int64_t steps, int64_t first_step = 0) {
  for (int64_t k = first_step; k < first_step + steps; ++k) {
    int64_t micro = 0;
    run.record(run.step->run(k, [&] { return make_batch(3 * k + 40 * micro++, 4); }));
  }
}

void expect_identical_training(const testing::TrainingSetup& base, int64_t steps) {
  testing::TrainingSetup capturable = base;
  capturable.capturable = true;
  testing::Training host(base), device(capturable);
  train(host, steps);
  train(device, steps);
  EXPECT_EQ(device.losses, host.losses);
  EXPECT_EQ(bits(device.grad_norms), bits(host.grad_norms));
  EXPECT_EQ(flat_parameters(*device.model), flat_parameters(*host.model));
  const auto hs = state_values(*host.optimizer), ds = state_values(*device.optimizer);
  ASSERT_FALSE(hs.empty());
  EXPECT_EQ(ds, hs);
}

TEST(CapturableTrainStep, AdamWTrainsBitForBitAsTheHostScalarStep) {
  expect_identical_training(setup(), 6);
}

TEST(CapturableTrainStep, SgdWithMomentumTrainsBitForBitAsTheHostScalarStep) {
  testing::TrainingSetup t = setup();
  t.sgd = true;
  expect_identical_training(t, 6);
}

TEST(CapturableTrainStep, GradientAccumulationTrainsBitForBitAsTheHostScalarStep) {
  testing::TrainingSetup t = setup();
  t.accumulation_steps = 3;
  expect_identical_training(t, 4);
}

TEST(CapturableTrainStep, Fp16SkippedStepsAreSkippedAndNotCountedAsOnTheHostScalarStep) {
  testing::TrainingSetup t = setup();
  t.fp16 = true;
  expect_identical_training(t, 6);
  t.capturable = true;
  testing::Training run(t);
  train(run, 6);
  // Steps 0 and 3 overflow: AdamW's step counts say 4, not 6, as without capturable.
  for (const auto& [name, t] : run.optimizer->state_dict())
    if (name.ends_with(".step")) {
      EXPECT_EQ(t.item(), 4.0) << name;
    }
}

TEST(CapturableTrainStep, DropoutFollowsTheStepCountInDeviceMemory) {
  // Same model, same batch, different step numbers: different masks, so different losses.
  testing::Training a(setup(true)), b(setup(true));
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
    testing::Training whole(setup());
    train(whole, 6);

    testing::Training first(setup(first_capturable));
    train(first, 3);
    NamedTensors opt;
    for (const auto& [name, t] : first.optimizer->state_dict()) opt.tensors.emplace_back(name, t);
    save_safetensors((dir / "model.safetensors").string(), first.model->state_dict());
    save_safetensors((dir / "optimizer.safetensors").string(), opt);

    testing::Training second(setup(!first_capturable));
    second.model->load_state_dict(load_safetensors((dir / "model.safetensors").string()));
    optim::Optimizer::StateDict loaded;
    for (const auto& [name, t] : load_safetensors((dir / "optimizer.safetensors").string()).tensors) {
      if (name.ends_with(".step")) {
        EXPECT_EQ(t.dim(), 0) << name << ": PyTorch's 0-dim f32 step count";
      }
      loaded[name] = t;
    }
    second.optimizer->load_state_dict(loaded);
    second.schedule->set_step(3);
    train(second, 3, 3);

    EXPECT_EQ(flat_parameters(*second.model), flat_parameters(*whole.model)) << "first capturable: " << first_capturable;
    EXPECT_EQ(state_values(*second.optimizer), state_values(*whole.optimizer));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::train
