// GraphStep (cuda_graph: true): K steps of which the first few run eagerly and
// the rest replay captured CUDA graphs give the parameters, losses, gradient
// norms and optimizer state of K eager steps of the default (host-scalar)
// TrainStep, bit for bit: same seed, dropout on, a schedule that changes the lr
// every step, clipping, weight decay, and a shorter batch that gets its own
// graph. The fp16 case adds steps the loss scaler skips inside the graph;
// others add gradient accumulation, DDP over NCCL, dropout keep bits
// (attention's and the feed-forward block's) saved by the forward in the
// graphed step only, the deferred biases' gradients formed in their linears
// (TANDEM_BIAS_GRADIENT=gemm) in both steps, the parameters' casts in one
// launch (TANDEM_PARAMETER_CASTS=batched) in both steps, and the weights'
// and biases' gradients written in f32 by their backward (TANDEM_LINEAR_GRADIENTS=master).
// These need a GPU and skip without one (TANDEM_REQUIRE_GPU=1 makes them fail);
// the refusals of a CPU model run everywhere.
#include "train/graph_step.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/init.h"
#include "core/check.h"
#include "kernels/bias_gradient.h"
#include "kernels/linear_gradients.h"
#include "kernels/parameter_casts.h"
#include "tests/testing/forced_switch.h"
#include "tests/testing/require_gpu.h"
#include "tests/train/training_fixture.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_switches.h"
#include "kernels/cuda/row_kernel_switches.h"
#endif

namespace tandem::train {
namespace {

using testing::bits;
using testing::flat_parameters;
using testing::state_values;
using testing::Training;
using testing::TrainingSetup;

// A larger model than the CPU step tests', dropout on.
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

data::Batch make_batch(int64_t first, int64_t rows, Device device) {
  return testing::patterned_batch(model_config(), first, rows, device);
}

// Step k's batch: 8 rows, but every fourth step 5 (an epoch's short last batch).
int64_t rows_of(int64_t k) { return k % 4 == 3 ? 5 : 8; }

TrainingSetup setup(Device device, bool capturable, bool fp16 = false,
                    std::shared_ptr<comm::ProcessGroup> group = nullptr, bool gradient_as_bucket_view = false,
                    int64_t accumulation_steps = 1) {
  TrainingSetup t;
  t.model = model_config();
  t.device = device;
  t.capturable = capturable;
  t.fp16 = fp16;
  t.group = std::move(group);
  t.gradient_as_bucket_view = gradient_as_bucket_view;
  t.accumulation_steps = accumulation_steps;
  return t;
}

// The dropout keep bits of attention (TANDEM_ATTENTION_DROPOUT_KEEP) and of the fused GELU + dropout
// (TANDEM_DROPOUT_KEEP) saved by the forward or recomputed by the backward, from here to the next call.
void dropout_keep_bits(bool saved) {
#if TANDEM_WITH_CUDA
  kernels::set_attention_dropout_keep_for_testing(saved ? kernels::AttentionDropoutKeep::Saved
                                                        : kernels::AttentionDropoutKeep::Recompute);
  kernels::set_dropout_keep_for_testing(saved ? kernels::DropoutKeep::Saved : kernels::DropoutKeep::Recompute);
#else
  (void)saved;
#endif
}

// With graphed_saves_keep_bits, the graphed step (its eager warm-up steps and its captures) saves
// the dropout keep bits of attention and of the GELU + dropout, and the eager step recomputes them.
void expect_graph_replays_match_eager_steps(bool fp16, std::shared_ptr<comm::ProcessGroup> group = nullptr,
                                            bool gradient_as_bucket_view = false, int64_t accumulation_steps = 1,
                                            bool graphed_saves_keep_bits = false) {
  const Device gpu = Device::cuda(0);
  constexpr int64_t kSteps = 12;
  Training eager(setup(gpu, /*capturable=*/false, fp16, group, gradient_as_bucket_view, accumulation_steps));
  Training graphed(setup(gpu, /*capturable=*/true, fp16, group, gradient_as_bucket_view, accumulation_steps));
  GraphStep graph(*graphed.step);
  int64_t eager_batches = 0, graphed_batches = 0;  // micro-batch c has rows_of(c) rows
  for (int64_t k = 0; k < kSteps; ++k) {
    dropout_keep_bits(false);
    eager.record(eager.step->run(k, [&] {
      const int64_t c = eager_batches++;
      return make_batch(8 * c, rows_of(c), gpu);
    }));
    dropout_keep_bits(graphed_saves_keep_bits);
    graphed.record(graph.run(k, [&] {
      const int64_t c = graphed_batches++;
      return make_batch(8 * c, rows_of(c), gpu);
    }));
  }
#if TANDEM_WITH_CUDA
  kernels::set_attention_dropout_keep_for_testing(std::nullopt);
  kernels::set_dropout_keep_for_testing(std::nullopt);
#endif
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

TEST(GraphStep, SavedDropoutKeepBitsReplayAsTheRecomputingEagerStep) {
  TANDEM_REQUIRE_GPU();
  // The saved decisions are the recomputed ones, so graphs captured with saved keep bits (attention's
  // and the GELU + dropout's buffers allocated inside the capture, written by the forward, read by the
  // backward) train as the default eager step, bit for bit.
  expect_graph_replays_match_eager_steps(/*fp16=*/false, nullptr, false, 1, /*graphed_saves_keep_bits=*/true);
}

TEST(GraphStep, BiasGradientsInTheGemmReplayAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  // TANDEM_BIAS_GRADIENT=gemm in both steps: the deferred biases' gradients from cuBLASLt's BGRADB
  // GEMM, with its workspace, and the GELU + dropout backward's rows walk, inside the capture, train as
  // they do eagerly, bit for bit, in f32 and fp16.
  const tandem::testing::ForcedSwitch gemm(kernels::set_bias_gradient_for_testing, kernels::BiasGradient::Gemm);
  expect_graph_replays_match_eager_steps(/*fp16=*/false);
  expect_graph_replays_match_eager_steps(/*fp16=*/true);
}

TEST(GraphStep, BatchedParameterCastsReplayAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  // TANDEM_PARAMETER_CASTS=batched in both steps: the forward's one cast_many launch, its buffer
  // allocated inside the capture, casts the weights the optimizer wrote in the replay before, and the
  // replays train as the eager steps do, bit for bit, in f32 (no casts: the switch changes nothing) and fp16.
  const tandem::testing::ForcedSwitch batched(kernels::set_parameter_casts_for_testing,
                                               kernels::ParameterCastMode::Batched);
  expect_graph_replays_match_eager_steps(/*fp16=*/false);
  expect_graph_replays_match_eager_steps(/*fp16=*/true);
}

TEST(GraphStep, LinearGradientsToTheMastersReplayAsTheEagerStep) {
  TANDEM_REQUIRE_GPU();
  // TANDEM_LINEAR_GRADIENTS=master in both steps: the linears' backward writes the masters' f32
  // gradients inside the capture, with no cast backward, and the replays train as the eager steps do,
  // bit for bit, in f32 (no casts: the switch changes nothing) and fp16, with each cast and batched.
  const tandem::testing::ForcedSwitch master(kernels::set_linear_gradients_for_testing,
                                             kernels::LinearGradients::Master);
  expect_graph_replays_match_eager_steps(/*fp16=*/false);
  expect_graph_replays_match_eager_steps(/*fp16=*/true);
  const tandem::testing::ForcedSwitch batched(kernels::set_parameter_casts_for_testing,
                                              kernels::ParameterCastMode::Batched);
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
  Training eager(setup(gpu, false)), graphed(setup(gpu, true));
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
  Training eager(setup(Device::cuda(0), /*capturable=*/false));
  EXPECT_THROW(GraphStep{*eager.step}, Error);
}

TEST(GraphStep, RefusesAModelOnTheCpu) {
  Training cpu(setup(Device::cpu(), /*capturable=*/true));
  try {
    GraphStep graph(*cpu.step);
    FAIL() << "a GraphStep on the CPU was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graph"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::train
