// A small training run shared by the step tests (step_test.cc: the capturable
// step against the host-scalar one; graph_step_test.cc: graph replays against
// eager steps): a TextClassifier, AdamW (or SGD with momentum) with two
// parameter groups, a linear warm-up schedule that changes the lr every step,
// clipping, and optionally fp16 with a scaler that skips every third step, DDP
// and gradient accumulation. Two runs built from one setup differ only where
// the setup says, so what they produce can be compared bit for bit.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ddp/distributed_data_parallel.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "train/step.h"

namespace tandem::train::testing {

// `rows` rows starting at row `first` of one fixed pseudo-random data set for a model
// configured as `c`: ids in 1..vocab-1, rows of different lengths (S/2 .. S-1 real tokens).
inline data::Batch patterned_batch(const nn::TextClassifierConfig& c, int64_t first, int64_t rows,
                                   Device device = Device::cpu()) {
  const int64_t S = c.max_seq_len, half = S / 2;
  std::vector<int64_t> ids, labels;
  std::vector<double> mask;
  for (int64_t r = first; r < first + rows; ++r) {
    for (int64_t j = 0; j < S; ++j) {
      ids.push_back(1 + (r * 7 + j * 3) % (c.vocab_size - 1));
      mask.push_back(j < half + r % half ? 1.0 : 0.0);
    }
    labels.push_back(r % c.num_classes);
  }
  data::Batch b;
  b.ids = Tensor::from_vector(ids, {rows, S}, DType::I64).to(device);
  b.mask = Tensor::from_vector(mask, {rows, S}, DType::U8).to(device);
  b.labels = Tensor::from_vector(labels, {rows}, DType::I64).to(device);
  return b;
}

struct TrainingSetup {
  nn::TextClassifierConfig model;
  Device device = Device::cpu();
  bool capturable = false;
  bool sgd = false;  // SGD with momentum instead of AdamW
  bool fp16 = false;
  int64_t accumulation_steps = 1;
  std::shared_ptr<comm::ProcessGroup> group;  // set: the model is wrapped in DDP with small buckets
  bool gradient_as_bucket_view = false;
};

struct Training {
  explicit Training(const TrainingSetup& setup)
      : model(std::make_shared<nn::TextClassifier>(setup.model, 42)), scaler(skipping_scaler(setup.fp16)) {
    model->to(setup.device);
    if (setup.group) {
      ddp::DDPOptions d;
      d.bucket_cap_mb = 0.01;  // several all-reduces per step
      d.first_bucket_cap_mb = 0.01;
      d.gradient_as_bucket_view = setup.gradient_as_bucket_view;
      ddp = std::make_unique<ddp::DistributedDataParallel>(model, setup.group, d);
    }
    std::vector<Tensor> decay, no_decay;
    for (const auto& [name, p] : model->named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    if (setup.sgd) {
      optimizer = std::make_unique<optim::SGD>(std::vector<optim::SGD::ParamGroup>{
          {decay, {.lr = 0.2, .momentum = 0.9, .weight_decay = 0.01}}, {no_decay, {.lr = 0.1, .momentum = 0.9}}});
    } else {
      optimizer = std::make_unique<optim::AdamW>(std::vector<optim::AdamW::ParamGroup>{
          {decay, {.lr = 2e-2, .weight_decay = 0.1}}, {no_decay, {.lr = 1e-2, .weight_decay = 0.0}}});
    }
    optim::ScheduleConfig sc;
    sc.kind = optim::ScheduleKind::Linear;
    sc.num_training_steps = 20;
    sc.warmup_steps = 3;
    schedule = std::make_unique<optim::LRScheduler>(*optimizer, sc);
    StepOptions o;
    o.max_grad_norm = 0.5;
    o.capturable = setup.capturable;
    o.zero_grad_to_none = !setup.gradient_as_bucket_view;
    o.accumulation_steps = setup.accumulation_steps;
    nn::ForwardContext ctx;
    ctx.seed = 7;
    ctx.compute_dtype = setup.fp16 ? DType::F16 : DType::F32;
    step = std::make_unique<TrainStep>(*model, ddp.get(), *optimizer, scaler, schedule.get(), ctx, o);
  }

  // Scale 2^40 overflows fp16 gradients; the backoff brings it to 2^10, which does not; two
  // clean steps grow it back to 2^40: every third step is skipped.
  static optim::GradScaler skipping_scaler(bool fp16) {
    optim::GradScalerOptions o;
    o.init_scale = std::ldexp(1.0, 40);
    o.backoff_factor = std::ldexp(1.0, -30);
    o.growth_factor = std::ldexp(1.0, 30);
    o.growth_interval = 2;
    return optim::GradScaler::for_compute_dtype(fp16 ? DType::F16 : DType::F32, o);
  }

  void record(const StepResult& r) {
    losses.push_back(r.loss_sum.item());
    grad_norms.push_back(r.grad_norm.item());
  }

  std::shared_ptr<nn::TextClassifier> model;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::GradScaler scaler;
  std::unique_ptr<optim::LRScheduler> schedule;
  std::unique_ptr<TrainStep> step;
  std::vector<double> losses, grad_norms;
};

// Every parameter element, in the module's order, as doubles (exact for f32).
inline std::vector<double> flat_parameters(const nn::Module& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    std::vector<double> v = p.detach().to_double_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The values' bit patterns: equal also where both are the same NaN (the norm of a skipped fp16 step).
inline std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out;
  for (double x : v) out.push_back(std::bit_cast<uint64_t>(x));
  return out;
}

// Every optimizer state tensor, by name, as doubles (exact for f32).
inline std::map<std::string, std::vector<double>> state_values(const optim::Optimizer& o) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : o.state_dict()) out[name] = t.to_double_vector();
  return out;
}

}  // namespace tandem::train::testing
