// GraphStep (cuda_graph: true): K steps of which the first few run eagerly and
// the rest replay captured CUDA graphs give the parameters, losses, gradient
// norms and optimizer state of K eager steps of the default (host-scalar)
// TrainStep, bit for bit: same seed, dropout on, a schedule that changes the lr
// every step, clipping, weight decay, and a shorter batch that gets its own
// graph. The fp16 case adds steps the loss scaler skips inside the graph;
// others add gradient accumulation and DDP over NCCL.
// These need a GPU and skip without one (TANDEM_REQUIRE_GPU=1 makes them fail);
// the refusals of a CPU model run everywhere.
#include "train/graph_step.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/init.h"
#include "core/check.h"
#include "ddp/distributed_data_parallel.h"
#include "optim/adamw.h"
#include "tests/testing/require_gpu.h"

namespace tandem::train {
namespace {

nn::TextClassifierConfig model_config() {
  nn::TextClassifierConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.n_heads = 2;
  c.num_layers = 2;
  c.dim_feedforward = 64;
  c.max_seq_len = 16;
  c.num_classes = 3;
  c.dropout = 0.2;
  return c;
}

// `rows` rows starting at row `first` of one fixed pseudo-random data set, on `device`.
data::Batch make_batch(int64_t first, int64_t rows, Device device) {
  const int64_t S = model_config().max_seq_len;
  std::vector<int64_t> ids, labels;
  std::vector<double> mask;
  for (int64_t r = first; r < first + rows; ++r) {
    for (int64_t j = 0; j < S; ++j) {
      ids.push_back(1 + (r * 11 + j * 7) % 49);
      mask.push_back(j < 5 + r % 9 ? 1.0 : 0.0);
    }
    labels.push_back(r % 3);
  }
  data::Batch b;
  b.ids = Tensor::from_vector(ids, {rows, S}, DType::I64).to(device);
  b.mask = Tensor::from_vector(mask, {rows, S}, DType::U8).to(device);
  b.labels = Tensor::from_vector(labels, {rows}, DType::I64).to(device);
  return b;
}

// Step k's batch: 8 rows, but every fourth step 5 (an epoch's short last batch).
int64_t rows_of(int64_t k) { return k % 4 == 3 ? 5 : 8; }

// With `group`, the model is wrapped in DDP (small buckets: several all-reduces per step).
struct Training {
  Training(Device device, bool capturable, bool fp16, std::shared_ptr<comm::ProcessGroup> group = nullptr,
           bool gradient_as_bucket_view = false, int64_t accumulation_steps = 1)
      : model(std::make_shared<nn::TextClassifier>(model_config(), 42)), scaler(make_scaler(fp16)) {
    model->to(device);
    if (group) {
      ddp::DDPOptions d;
      d.bucket_cap_mb = 0.01;
      d.first_bucket_cap_mb = 0.01;
      d.gradient_as_bucket_view = gradient_as_bucket_view;
      ddp = std::make_unique<ddp::DistributedDataParallel>(model, group, d);
    }
    std::vector<Tensor> decay, no_decay;
    for (const auto& [name, p] : model->named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    optimizer = std::make_unique<optim::AdamW>(std::vector<optim::AdamW::ParamGroup>{
        {decay, {.lr = 3e-3, .weight_decay = 0.1}}, {no_decay, {.lr = 1e-3, .weight_decay = 0.0}}});
    optim::ScheduleConfig sc;
    sc.kind = optim::ScheduleKind::Linear;
    sc.num_training_steps = 20;
    sc.warmup_steps = 4;
    schedule = std::make_unique<optim::LRScheduler>(*optimizer, sc);
    StepOptions o;
    o.max_grad_norm = 0.5;
    o.capturable = capturable;
    o.zero_grad_to_none = !gradient_as_bucket_view;
    o.accumulation_steps = accumulation_steps;
    nn::ForwardContext ctx;
    ctx.seed = 1234;
    ctx.compute_dtype = fp16 ? DType::F16 : DType::F32;
    step = std::make_unique<TrainStep>(*model, ddp.get(), *optimizer, scaler, schedule.get(), ctx, o);
  }

  // As tests/train/step_test.cc: scale 2^40 overflows fp16 gradients, the backoff to 2^10 does not,
  // two clean steps grow it back: every third step is skipped.
  static optim::GradScaler make_scaler(bool fp16) {
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

std::vector<double> flat_parameters(const nn::Module& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    std::vector<double> v = p.detach().to_double_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

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

void expect_graph_replays_match_eager_steps(bool fp16, std::shared_ptr<comm::ProcessGroup> group = nullptr,
                                            bool gradient_as_bucket_view = false, int64_t accumulation_steps = 1) {
  const Device gpu = Device::cuda(0);
  constexpr int64_t kSteps = 12;
  Training eager(gpu, /*capturable=*/false, fp16, group, gradient_as_bucket_view, accumulation_steps);
  Training graphed(gpu, /*capturable=*/true, fp16, group, gradient_as_bucket_view, accumulation_steps);
  GraphStep graph(*graphed.step);
  int64_t eager_batches = 0, graphed_batches = 0;  // micro-batch c has rows_of(c) rows
  for (int64_t k = 0; k < kSteps; ++k) {
    eager.record(eager.step->run(k, [&] {
      const int64_t c = eager_batches++;
      return make_batch(8 * c, rows_of(c), gpu);
    }));
    graphed.record(graph.run(k, [&] {
      const int64_t c = graphed_batches++;
      return make_batch(8 * c, rows_of(c), gpu);
    }));
  }
  EXPECT_EQ(graphed_batches, eager_batches);
  // Without accumulation: 8-row and 5-row batches; with 2 micro-batches: (8, 8) and (8, 5).
  EXPECT_EQ(graph.graphs(), 2);
  EXPECT_EQ(graph.replays(), kSteps - GraphStepOptions{}.warmup_steps);
  EXPECT_EQ(graphed.losses, eager.losses);
  EXPECT_EQ(bits(graphed.grad_norms), bits(eager.grad_norms));
  EXPECT_EQ(flat_parameters(*graphed.model), flat_parameters(*eager.model));
  EXPECT_EQ(state_values(*graphed.optimizer), state_values(*eager.optimizer));
  EXPECT_EQ(graphed.scaler.get_scale(), eager.scaler.get_scale());
}

TEST(GraphStep, ReplaysTrainAsTheEagerStepBitForBit) {
  TANDEM_REQUIRE_GPU();
  expect_graph_replays_match_eager_steps(/*fp16=*/false);
}

TEST(GraphStep, GradientAccumulationReplaysTheMicroBatchesAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  expect_graph_replays_match_eager_steps(/*fp16=*/false, nullptr, false, /*accumulation_steps=*/2);
}

TEST(GraphStep, Fp16ReplaysSkipOverflowingStepsAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  expect_graph_replays_match_eager_steps(/*fp16=*/true);
}

#if TANDEM_WITH_NCCL
TEST(GraphStep, WithDdpOverNcclTheCapturedAllReducesTrainAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  // NCCL at world size 1 runs DDP's whole device path: each bucket's all-reduce on the comm
  // stream after an event on the compute stream, joined back in finalize, and the bucket
  // rebuild at the second (eager) step. The graph captures the all-reduces with the step.
  auto group = comm::init_process_group("nccl", comm::RankInfo{}, {});
  ASSERT_EQ(group->backend_name(), "nccl");
  for (bool bucket_view : {false, true}) {
    SCOPED_TRACE(bucket_view ? "gradient_as_bucket_view" : "gradients copied out of the buckets");
    expect_graph_replays_match_eager_steps(/*fp16=*/false, group, bucket_view);
  }
  SCOPED_TRACE("2 micro-batches, the first under no_sync");
  expect_graph_replays_match_eager_steps(/*fp16=*/false, group, false, /*accumulation_steps=*/2);
}
#endif

TEST(GraphStep, ReplayedResultsOutliveLaterReplays) {
  TANDEM_REQUIRE_GPU();
  // A caller (the trainer's logging window) may keep a step's loss while later steps run.
  const Device gpu = Device::cuda(0);
  Training eager(gpu, false, false), graphed(gpu, true, false);
  GraphStep graph(*graphed.step);
  std::vector<Tensor> kept_eager, kept_graph;
  for (int64_t k = 0; k < 6; ++k) {
    auto batch = [&] { return make_batch(8 * k, 8, gpu); };
    kept_eager.push_back(eager.step->run(k, batch).loss_sum);
    kept_graph.push_back(graph.run(k, batch).loss_sum);
  }
  for (size_t k = 0; k < kept_graph.size(); ++k) EXPECT_EQ(kept_graph[k].item(), kept_eager[k].item()) << "step " << k;
}

TEST(GraphStep, RefusesAStepThatIsNotCapturable) {
  TANDEM_REQUIRE_GPU();
  Training eager(Device::cuda(0), /*capturable=*/false, /*fp16=*/false);
  EXPECT_THROW(GraphStep{*eager.step}, Error);
}

TEST(GraphStep, RefusesAModelOnTheCpu) {
  Training cpu(Device::cpu(), /*capturable=*/true, /*fp16=*/false);
  try {
    GraphStep graph(*cpu.step);
    FAIL() << "a GraphStep on the CPU was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graph"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::train
