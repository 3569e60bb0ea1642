#include "train/step_runner.h"

#include <chrono>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "train/checkpoint.h"
#include "train/setup.h"
#include "comm/rank_env.h"
#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/elapsed.h"
#include "core/stream.h"
#include "data/batch_source.h"
#include "data/data_loader.h"
#include "data/tokenizer.h"
#include "optim/grad_scaler.h"
#include "train/graph_step.h"
#include "train/step.h"
#include "train/synthetic_source.h"

namespace tandem::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Host time of each phase of a TrainStep, as a bench sample. The synchronised micro-batch's
// backward is not all compute (it waits for the all-reduces at its end): its compute time comes
// from DDP's statistics instead.
class StepTimer final : public StepObserver {
 public:
  void enter(profile::Phase phase) override {
    stop();
    phase_ = phase;
    open_ = true;
    start_ = Clock::now();
  }
  void on_batch(const data::Batch&, bool synchronised) override { synchronised_ = synchronised; }
  // Closes the open phase.
  void stop() {
    if (!open_) return;
    const double ms = milliseconds_between(start_, Clock::now());
    open_ = false;
    switch (phase_) {
      case profile::Phase::DataWait: s_.data_wait_ms += ms; break;
      case profile::Phase::Forward: s_.forward_ms += ms; break;
      case profile::Phase::BackwardCompute:
        s_.backward_ms += ms;
        if (!synchronised_) s_.backward_compute_ms += ms;
        break;
      case profile::Phase::Optimizer: s_.optimizer_ms += ms; break;
      default: TANDEM_FAIL("bench: a train step entered phase {}", profile::phase_name(phase_));
    }
  }
  const report::StepSample& sample() const { return s_; }

 private:
  report::StepSample s_;
  profile::Phase phase_ = profile::Phase::DataWait;
  Clock::time_point start_;
  bool open_ = false, synchronised_ = false;
};

DType precision_dtype(const std::string& p) {
  if (p == "fp32") return DType::F32;
  if (p == "bf16") return DType::BF16;
  if (p == "fp16") return DType::F16;
  TANDEM_FAIL("precision '{}': expected fp32, bf16 or fp16", p);
}

}  // namespace

StepCase config_case(const TrainConfig& config, const std::string& label) {
  StepCase c;
  c.label = label;
  c.bucket_cap_mb = config.ddp_bucket_cap_mb;
  c.precision = config.bf16 ? "bf16" : (config.fp16 ? "fp16" : "fp32");
  c.comm_hook = config.ddp_comm_hook;
  return c;
}

struct StepRunner::State {
  TrainConfig config;
  std::shared_ptr<comm::ProcessGroup> group;
  StepRunnerOptions options;
  int rank = 0, world = 1;
  Device device;
  int64_t train_examples = 0;
  std::unique_ptr<data::DataLoader> loader;
  int64_t epoch = 0;
  std::shared_ptr<nn::TextClassifier> model;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<optim::GradScaler> scaler;
  std::unique_ptr<TrainStep> train_step;
  std::unique_ptr<GraphStep> graph_step;  // cuda_graph
  nn::ForwardContext ctx;
  int64_t step = 0;
  std::vector<int64_t> bucket_bytes;
  // The gradients DDP reduces, in the ready order of the case's first step; each sample's ready
  // times are put in this order by name.
  std::vector<std::string> gradient_names;
  std::vector<int64_t> gradient_bytes;

  data::Batch next_batch() {
    std::optional<data::Batch> b = loader->next();
    if (!b) {
      loader->start_epoch(++epoch);
      b = loader->next();
    }
    TANDEM_CHECK(b.has_value(), "rank {}: the training data gives no full batch of {} (drop_last; {} examples in all)",
                 rank, config.per_device_train_batch_size, train_examples);
    return std::move(*b);
  }

  void prepare(const StepCase& c) {
    graph_step.reset();  // its graph holds the old DDP's buckets
    optimizer->zero_grad(true);
    gradient_names.clear();
    gradient_bytes.clear();
    ddp.reset();  // the old reducer's hooks go before the new one's arrive
    if (group && world > 1) {
      TrainConfig hooked = config;
      hooked.ddp_comm_hook = c.comm_hook;
      ddp::DDPOptions d = ddp_options(hooked);
      d.bucket_cap_mb = c.one_bucket ? 1e9 : c.bucket_cap_mb;
      if (c.one_bucket) d.first_bucket_cap_mb = 1e9;
      ddp = std::make_unique<ddp::DistributedDataParallel>(model, group, d);
    }
    ctx.compute_dtype = precision_dtype(c.precision);
    scaler.emplace(optim::GradScaler::for_compute_dtype(ctx.compute_dtype));
    // A constant learning rate (no schedule): it does not change the work.
    train_step = std::make_unique<TrainStep>(*model, ddp.get(), *optimizer, *scaler, nullptr, ctx, step_options(config));
    if (config.cuda_graph) graph_step = std::make_unique<GraphStep>(*train_step);
  }

  void record_ready_times(const ddp::IterationStats& st, report::StepSample& s) {
    if (gradient_names.empty()) {
      gradient_names = st.ready_order;
      for (size_t b : st.ready_bytes) gradient_bytes.push_back(static_cast<int64_t>(b));
    }
    std::unordered_map<std::string_view, double> ready;
    for (size_t i = 0; i < st.ready_order.size(); ++i) ready.emplace(st.ready_order[i], st.ready_ms[i]);
    for (const std::string& name : gradient_names) {
      const auto it = ready.find(name);
      TANDEM_CHECK(it != ready.end(), "rank {}: gradient '{}' was not reduced in step {}", rank, name, step);
      s.gradient_ready_ms.push_back(it->second);
    }
    for (const ddp::BucketStats& b : st.buckets) {
      s.bucket_ready_ms.push_back(b.ready_ms);
      s.bucket_comm_start_ms.push_back(b.comm_start_ms);
      s.bucket_comm_end_ms.push_back(b.comm_end_ms);
    }
  }

  report::StepSample one_step() {
    StepTimer timer;
    const Clock::time_point t0 = Clock::now();
    auto batches = [this] { return next_batch(); };
    StepResult r = graph_step ? graph_step->run(step, batches, &timer) : train_step->run(step, batches, &timer);
    timer.stop();
    report::StepSample s = timer.sample();
    const Clock::time_point tl = Clock::now();
    ++step;
    if (config.logging_steps > 0 && step % config.logging_steps == 0) {
      (void)r.loss_sum.item();  // what a logging step does: read the loss on the host
      s.sync_ms = milliseconds_between(tl, Clock::now());
      s.logging_step = true;
    }
    if (device.is_cuda()) cuda::current_stream(device.index).synchronize();
    s.step_ms = milliseconds_between(t0, Clock::now());
    // A replayed step (cuda_graph) leaves DDP's host-side statistics at those of the captured one:
    // none are recorded. After the device synchronisation, so that completing NCCL's comm times does not block.
    if (ddp && !graph_step) {
      const ddp::IterationStats& st = ddp->complete_stats();
      s.backward_compute_ms += st.backward_compute_ms;
      s.comm_ms = st.backward_comm_ms;
      s.exposed_comm_ms = st.exposed_comm_ms;
      s.overlap_ms = st.overlap_ms;
      record_ready_times(st, s);
    }
    return s;
  }
};

StepRunner::StepRunner(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group, StepRunnerOptions options)
    : s_(std::make_unique<State>()) {
  validate(config);
  State& s = *s_;
  s.config = config;
  s.group = std::move(group);
  s.options = options;
  s.rank = s.group ? s.group->rank() : 0;
  s.world = s.group ? s.group->size() : 1;
  s.device = select_device(config, s.group ? comm::rank_info_from_env().local_rank : 0);  // as the nccl backend's
  const int64_t batch = config.per_device_train_batch_size;

  std::shared_ptr<const data::BatchSource> source;
  int64_t vocab = 0, classes = 0;
  if (options.synthetic) {
    vocab = config.data.vocab_max_size;
    classes = kSyntheticClasses;
    s.train_examples = std::max<int64_t>(4096, 4 * batch * s.world);
    source = std::make_shared<SyntheticSource>(s.train_examples, config.model.max_seq_len, vocab,
                                               options.synthetic_real_fraction);
  } else {
    const TrainingData d = load_training_data(config, /*with_test=*/false);
    vocab = d.tokenizer->vocab_size();
    classes = d.train->num_classes();
    s.train_examples = d.train->size();
    source = std::make_shared<data::TextClassificationSource>(d.train, d.tokenizer, config.model.max_seq_len);
  }
  // Every step a full batch: the same work each step.
  data::SamplerOptions so = train_sampler_options(config, *source, s.rank, s.world);
  so.drop_last = true;
  data::DataLoaderOptions lo = train_loader_options(config, s.device);
  lo.drop_last = true;
  s.loader = std::make_unique<data::DataLoader>(source, data::DistributedSampler(source->size(), so), lo);
  s.loader->start_epoch(0);

  s.model =
      std::make_shared<nn::TextClassifier>(model_config(config, vocab, classes), static_cast<uint64_t>(config.seed));
  s.model->to(s.device);
  s.model->train(true);
  s.optimizer = make_optimizer(config, *s.model);
  s.ctx = forward_context(config, s.rank);  // its compute dtype is each case's
}

StepRunner::~StepRunner() = default;

std::vector<report::StepSample> StepRunner::run(const StepCase& c, int warmup, int steps) {
  TANDEM_CHECK(warmup >= 0 && steps > 0, "bench: need warmup >= 0 and steps > 0 (got {} and {})", warmup, steps);
  TANDEM_CHECK(!s_->config.cuda_graph || warmup > GraphStepOptions{}.warmup_steps,
               "bench: cuda_graph: true needs more than {} warm-up steps (the eager steps and the capture), got {}",
               GraphStepOptions{}.warmup_steps, warmup);
  State& s = *s_;
  s.prepare(c);
  std::vector<report::StepSample> out;
  // Installed for the timed steps only, and removed however the run ends.
  struct ObserveOps {
    profile::OpProfile* ops = nullptr;
    ~ObserveOps() {
      if (ops) set_op_observer(nullptr);
    }
  } observe;
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) {
      if (s.device.is_cuda())
        cuda_memory::reset_peak(s.device.index);
      else
        host_memory::reset_peak();
      if (s.options.ops) set_op_observer(observe.ops = s.options.ops);
    }
    report::StepSample sample = s.one_step();  // on CUDA it ends synchronised, so the op events are complete
    if (i >= warmup) out.push_back(sample);
    if (observe.ops) observe.ops->end_step();
  }
  peak_memory_ = static_cast<int64_t>(s.device.is_cuda() ? cuda_memory::stats(s.device.index).peak_with_graphs()
                                                         : host_memory::stats().peak_in_use);
  s.bucket_bytes.clear();
  if (s.ddp)
    for (const ddp::BucketSpec& b : s.ddp->buckets()) s.bucket_bytes.push_back(static_cast<int64_t>(b.bytes));
  return out;
}

report::RunFacts StepRunner::facts(const StepCase& c) const {
  const State& s = *s_;
  const TrainConfig& k = s.config;
  report::RunFacts f;
  f.label = c.label;
  f.device = s.device.is_cuda() ? "cuda" : "cpu";
  f.backend = s.group && s.world > 1 ? s.group->backend_name() : "none";
  f.world_size = s.world;
  f.per_device_batch = k.per_device_train_batch_size;
  f.gradient_accumulation_steps = k.gradient_accumulation_steps;
  f.seq_len = k.model.max_seq_len;
  f.padding = k.data.padding;
  f.pad_to_multiple_of = k.data.pad_to_multiple_of;
  f.logging_steps = k.logging_steps;
  f.save_steps = k.save_steps;
  f.dataloader_num_workers = k.dataloader_num_workers;
  f.dataloader_pin_memory = k.dataloader_pin_memory;
  f.precision = c.precision;
  f.comm_hook = c.comm_hook;
  f.bucket_cap_mb = c.bucket_cap_mb;
  f.one_bucket = c.one_bucket;
  f.bucket_bytes = s.bucket_bytes;
  f.gradient_names = s.gradient_names;
  f.gradient_bytes = s.gradient_bytes;
  f.num_parameters = s.model->num_parameters();
  f.vocab_size = s.model->config().vocab_size;
  f.d_model = s.model->config().d_model;
  f.train_examples = s.train_examples;
  f.synthetic_data = s.options.synthetic;
  f.synthetic_real_fraction = s.options.synthetic ? s.options.synthetic_real_fraction : 1.0;
  return f;
}

double StepRunner::time_checkpoint_ms(const fs::path& dir) {
  State& s = *s_;
  const fs::path scratch = dir / fmt::format(".checkpoint-timing-rank{}", s.rank);
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  NamedTensors optimizer_state;
  for (const auto& [name, t] : s.optimizer->state_dict()) optimizer_state.tensors.emplace_back(name, t);
  TrainerState state;
  state.global_step = s.step;
  state.world_size = s.world;
  state.seed = s.config.seed;
  const Clock::time_point t0 = Clock::now();
  save_checkpoint(scratch, s.model->state_dict(), optimizer_state, state, to_yaml(s.config), {}, 1);
  const double ms = milliseconds_between(t0, Clock::now());
  fs::remove_all(scratch);
  return ms;
}

}  // namespace tandem::train
