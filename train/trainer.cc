#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/rank_env.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/elapsed.h"
#include "core/stream.h"
#include "data/batch_source.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/powersgd_hook.h"
#include "kernels/elementwise.h"
#include "optim/grad_scaler.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/graph_step.h"
#include "train/metrics_writer.h"
#include "train/model_selection.h"
#include "train/profiler.h"
#include "train/progress.h"
#include "train/setup.h"
#include "train/step.h"

namespace tandem::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using profile::Phase;

namespace {

NamedTensors to_named(const optim::Optimizer::StateDict& state) {
  NamedTensors out;
  for (const auto& [name, t] : state) out.tensors.emplace_back(name, t);
  return out;
}

optim::Optimizer::StateDict from_named(const NamedTensors& named) {
  optim::Optimizer::StateDict out;
  for (const auto& [name, t] : named.tensors) out[name] = t;
  return out;
}

// metrics.jsonl's {"kind": "ddp", "when": ..., ...}: DDP's setup and buckets (ddp/logging_data.h).
nlohmann::json ddp_record(const ddp::DistributedDataParallel& d, const char* when) {
  nlohmann::json j = nlohmann::json::parse(ddp::to_json(d.logging_data()));
  j["kind"] = "ddp";
  j["when"] = when;
  return j;
}

// FNV-1a over every parameter's bytes, gathered from all ranks.
std::vector<int64_t> weight_checksums(const nn::Module& model, comm::ProcessGroup* group) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor host = p.detach().to(Device::cpu());
    const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
    for (size_t i = 0; i < host.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  const int64_t mine = static_cast<int64_t>(h);
  if (!group) return {mine};
  Device where = model.named_parameters().front().second.device();
  Tensor in = Tensor::from_vector(std::vector<int64_t>{mine}, {1}, DType::I64, where);
  Tensor out = Tensor::zeros({group->size()}, DType::I64, where);
  TANDEM_CHECK(group->all_gather(in, out)->wait(std::chrono::minutes(5)),
               "rank {}: timed out gathering the final weight checksums", group->rank());
  return out.to_int_vector();
}

// One rank's training job: what train() builds, and the parts of its loop.
class Job {
 public:
  Job(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group, const TrainerOptions& options);

  bool done() const { return step_ >= stop_at_ || stop_requested_; }
  void run_step();
  TrainResult finish();

 private:
  data::Batch next_batch();
  void resume();
  void log(double loss, double grad_norm);
  void periodic_eval(double epoch);
  EvalResult run_eval(data::DataLoader& loader, const char* split, double epoch, const char* kind = "eval");
  bool agree_with_rank0(bool decision);
  void restore_best_model();
  void save();

  const TrainConfig config_;
  const TrainerOptions options_;
  std::shared_ptr<comm::ProcessGroup> group_;
  const int rank_, world_;
  const bool main_rank_;
  const Progress progress_;
  const fs::path out_dir_;
  const Clock::time_point job_start_ = Clock::now();
  Device device_;
  DType compute_;
  TrainingData data_;
  std::vector<double> class_weights_;  // of the training loss; empty: unweighted
  fs::path vocab_file_;
  // Rank 0: the periodic evaluations' split (validation, else test), and test when that differs.
  std::unique_ptr<data::DataLoader> train_loader_, eval_loader_, test_loader_;
  const char* eval_split_ = "test";
  std::shared_ptr<nn::TextClassifier> model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<ddp::ZeroRedundancyOptimizer> zero_;  // zero_stage 1 at world > 1, instead of ddp_
  std::shared_ptr<ddp::PowerSGDState> powersgd_;        // ddp_comm_hook powersgd: what it sent
  std::unique_ptr<optim::Optimizer> own_optimizer_;     // without ZeRO
  optim::Optimizer* optimizer_ = nullptr;               // own_optimizer_, or ZeRO's shard optimizer
  std::unique_ptr<optim::LRScheduler> scheduler_;
  optim::GradScaler scaler_;
  std::unique_ptr<TrainProfiler> profiler_;
  std::unique_ptr<TrainStep> train_step_;
  std::unique_ptr<GraphStep> graph_step_;  // cuda_graph: replays train_step_'s compute as a CUDA graph
  std::unique_ptr<MetricsWriter> metrics_;  // rank 0
  std::optional<ModelSelection> selection_;  // load_best_model_at_end or early stopping
  NamedTensors best_weights_;                // rank 0, load_best_model_at_end: a host copy of the best model
  bool stop_requested_ = false;              // early stopping, decided by rank 0
  int64_t last_eval_step_ = -1;

  TrainerState state_;
  int64_t batches_per_epoch_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  int64_t step_ = 0, stop_at_ = 0;
  int64_t epoch_ = 0, batches_in_epoch_ = 0, position_ = 0;  // position: rows of this epoch consumed
  // The logging window: device sums read only when logging.
  Tensor window_loss_, last_grad_norm_;
  int64_t window_micro_ = 0, window_samples_ = 0;
  // Rows and row positions (padding included) of this rank's batches in the window: what
  // data.padding longest saves shows as a shorter mean_padded_length.
  int64_t window_rows_ = 0, window_positions_ = 0;
  Clock::time_point window_start_, train_start_;
  int64_t trained_samples_ = 0;
  double last_train_loss_ = 0;
};

Job::Job(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group, const TrainerOptions& options)
    : config_(config),
      options_(options),
      group_(std::move(group)),
      rank_(group_ ? group_->rank() : 0),
      world_(group_ ? group_->size() : 1),
      main_rank_(rank_ == 0),
      progress_(main_rank_ && !options.quiet),
      out_dir_(config.output_dir),
      scaler_(optim::GradScaler::for_compute_dtype(compute_dtype(config))) {
  // The GPU follows the local rank, as the nccl backend's does (not the global rank: nodes number their GPUs from 0).
  device_ = select_device(config_, group_ ? comm::rank_info_from_env().local_rank : 0);
  compute_ = compute_dtype(config_);

  data_ = load_training_data(config_);
  vocab_file_ = out_dir_ / data_.tokenizer->file_name();
  progress_.say(data::describe(*data_.train, "train"));
  if (data_.validation) progress_.say(data::describe(*data_.validation, "validation"));
  progress_.say(data::describe(*data_.test, "test"));

  data::DataLoaderOptions loader_options = train_loader_options(config_, device_);
  loader_options.time_copies = device_.is_cuda();  // the step profiler's h2d phase
  const int64_t seq_len = config_.model.max_seq_len;
  auto train_source = std::make_shared<data::TextClassificationSource>(data_.train, data_.tokenizer, seq_len);
  train_loader_ = std::make_unique<data::DataLoader>(
      train_source,
      data::DistributedSampler(data_.train->size(), train_sampler_options(config_, *train_source, rank_, world_)),
      loader_options);
  if (main_rank_) {
    // Evaluation runs on rank 0 over the whole split, one process, no padding.
    data::SamplerOptions eval_sampler;
    eval_sampler.shuffle = false;
    data::DataLoaderOptions eval_options = loader_options;
    eval_options.batch_size = config_.per_device_eval_batch_size;
    eval_options.num_workers = 0;
    auto loader = [&](const std::shared_ptr<data::Dataset>& split) {
      return std::make_unique<data::DataLoader>(
          std::make_shared<data::TextClassificationSource>(split, data_.tokenizer, seq_len),
          data::DistributedSampler(split->size(), eval_sampler), eval_options);
    };
    eval_loader_ = loader(data_.validation ? data_.validation : data_.test);
    if (data_.validation) test_loader_ = loader(data_.test);
  }
  if (data_.validation) eval_split_ = "validation";
  if (config_.load_best_model_at_end || config_.early_stopping_patience > 0) {
    selection_.emplace(config_.metric_for_best_model, config_.early_stopping_patience,
                       config_.early_stopping_threshold);
    if (!data_.validation)
      progress_.say("note: the model is chosen by its test-split evaluations, which overstates its test accuracy; "
                    "set data.validation_fraction to choose on a validation split");
  }

  model_ = std::make_shared<nn::TextClassifier>(
      model_config(config_, data_.tokenizer->vocab_size(), data_.train->num_classes()),
      static_cast<uint64_t>(config_.seed));
  fit_idf(*model_, config_, data_);
  model_->to(device_);
  model_->train(true);
  if (group_ && world_ > 1 && config_.zero_stage == 1) {
    zero_ = make_zero_optimizer(config_, *model_, group_);
    TANDEM_CHECK(zero_->shard_optimizer(), "zero_stage 1: rank {}'s shard holds no parameter", rank_);
    optimizer_ = zero_->shard_optimizer();
    progress_.say(fmt::format("ZeRO-1: rank {} updates parameter elements [{}, {}) of {}", rank_,
                              zero_->shard_range().first, std::min(zero_->shard_range().second, zero_->num_elements()),
                              zero_->num_elements()));
  } else {
    if (group_ && world_ > 1) {
      ddp::DDPOptions d = ddp_options(config_);
      if (config_.ddp_comm_hook == "powersgd") powersgd_ = std::static_pointer_cast<ddp::PowerSGDState>(d.comm_hook_state);
      ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_, group_, d);
    }
    own_optimizer_ = make_optimizer(config_, *model_);
    optimizer_ = own_optimizer_.get();
  }

  batches_per_epoch_ = train_loader_->num_batches();
  TANDEM_CHECK(batches_per_epoch_ > 0, "the training split has no batches on rank {}", rank_);
  steps_per_epoch_ = std::max<int64_t>(1, batches_per_epoch_ / config_.gradient_accumulation_steps);
  if (config_.max_steps > 0) {
    total_steps_ = config_.max_steps;
  } else {
    const double steps = std::ceil(config_.num_train_epochs * static_cast<double>(steps_per_epoch_));
    // 2^62: a step count far beyond any run that still leaves room for the counters built on it.
    TANDEM_CHECK(steps <= 0x1p62, "config: num_train_epochs {} at {} steps per epoch is more steps than can be counted",
                 config_.num_train_epochs, steps_per_epoch_);
    total_steps_ = static_cast<int64_t>(steps);
  }
  optim::ScheduleConfig sc;
  sc.kind = optim::parse_schedule_kind(config_.lr_scheduler_type);
  sc.num_training_steps = total_steps_;
  sc.warmup_steps = config_.warmup_steps;
  sc.warmup_ratio = config_.warmup_ratio;
  scheduler_ = std::make_unique<optim::LRScheduler>(*optimizer_, sc);

  profiler_ = std::make_unique<TrainProfiler>(
      config_, TrainProfiler::Context{rank_, world_, device_, ddp_.get(), group_.get(),
                                      [this](const std::string& line) { progress_.say(line); }});
  StepOptions step_opts = step_options(config_);
  class_weights_ = class_weights(config_, *data_.train);
  if (!class_weights_.empty()) {
    step_opts.class_weights = Tensor::from_vector(class_weights_, {data_.train->num_classes()}, DType::F32).to(device_);
    std::string list;
    for (size_t k = 0; k < class_weights_.size(); ++k)
      list += fmt::format("{}{} {:.3g}", k ? ", " : "", data_.train->class_names[k], class_weights_[k]);
    progress_.say(fmt::format("class weights ({}): {}", config_.class_weights, list));
  }
  train_step_ = zero_ ? std::make_unique<TrainStep>(*model_, *zero_, scaler_, scheduler_.get(),
                                                    forward_context(config_, rank_), std::move(step_opts))
                      : std::make_unique<TrainStep>(*model_, ddp_.get(), *optimizer_, scaler_, scheduler_.get(),
                                                    forward_context(config_, rank_), std::move(step_opts));
  if (config_.cuda_graph) graph_step_ = std::make_unique<GraphStep>(*train_step_);

  state_.seed = config_.seed;
  state_.world_size = world_;
  state_.class_names = data_.train->class_names;
  if (!options_.resume.empty()) resume();
  step_ = state_.global_step;
  epoch_ = state_.epoch;
  position_ = state_.sampler.position;
  if (position_ > 0) {
    train_loader_->resume(state_.sampler);
  } else {
    train_loader_->start_epoch(epoch_);
  }
  stop_at_ = options_.stop_after_steps > 0 ? std::min(total_steps_, step_ + options_.stop_after_steps) : total_steps_;

  // Only now that every check has passed: a job refused above leaves nothing in output_dir.
  if (main_rank_) {
    std::error_code ec;
    fs::create_directories(out_dir_, ec);
    TANDEM_CHECK(!ec, "output_dir {}: cannot create it: {}", out_dir_.string(), ec.message());
    data_.tokenizer->save(vocab_file_);
    write_file_atomically(out_dir_ / "config.yaml", to_yaml(config_));
    metrics_ = std::make_unique<MetricsWriter>(out_dir_, !options_.resume.empty());
    if (ddp_) metrics_->record(ddp_record(*ddp_, "start"));
  }
  window_start_ = train_start_ = Clock::now();
}

void Job::resume() {
  std::optional<fs::path> dir =
      options_.resume == "latest" ? latest_checkpoint(out_dir_) : std::optional<fs::path>(options_.resume);
  TANDEM_CHECK(dir.has_value(), "--resume latest: no checkpoint under {}", out_dir_.string());
  Checkpoint ck = load_checkpoint(*dir);
  TANDEM_CHECK(!zero_, "--resume with zero_stage 1: checkpoints hold the model but not the sharded optimizer state; "
                       "resuming them is not supported yet");
  TANDEM_CHECK(ck.state.world_size == world_, "checkpoint {} was written by {} ranks, this job has {}", dir->string(),
               ck.state.world_size, world_);
  model_->load_state_dict(ck.model);
  optimizer_->load_state_dict(from_named(ck.optimizer));
  if (ck.state.scaler) scaler_.load_state_dict(*ck.state.scaler);
  scheduler_->set_step(ck.state.global_step);
  state_ = ck.state;
  progress_.say(fmt::format("resumed from {} at step {}", dir->string(), state_.global_step));
}

// The next micro-batch; where the loader runs dry a whole epoch is done, and the step goes on in the next one.
data::Batch Job::next_batch() {
  for (;;) {
    if (std::optional<data::Batch> batch = train_loader_->next()) {
      ++batches_in_epoch_;
      position_ += batch->labels.size(0);
      window_rows_ += batch->ids.size(0);
      window_positions_ += batch->ids.numel();
      return std::move(*batch);
    }
    profiler_->no_batch();
    if (config_.eval_strategy == "epoch") periodic_eval(static_cast<double>(epoch_ + 1));
    train_loader_->start_epoch(++epoch_);
    batches_in_epoch_ = position_ = 0;
    profiler_->begin_step(step_ + 1);  // the step goes on (or starts afresh if it had no batch yet)
    profiler_->enter(Phase::DataWait);
  }
}

void Job::run_step() {
  profiler_->begin_step(step_ + 1);
  auto batches = [this] { return next_batch(); };
  StepResult r = graph_step_ ? graph_step_->run(step_, batches, profiler_.get())
                             : train_step_->run(step_, batches, profiler_.get());
  ++step_;
  state_.global_step = step_;
  window_loss_ = window_loss_.defined() ? kernels::add(window_loss_, r.loss_sum) : r.loss_sum;
  if (r.grad_norm.defined()) last_grad_norm_ = r.grad_norm;
  window_micro_ += r.micro_batches;
  window_samples_ += r.samples;
  trained_samples_ += r.samples;

  if (step_ % config_.logging_steps == 0 || done()) {
    profiler_->enter(Phase::Logging);
    // The one host synchronisation of a logging step.
    const double loss = window_loss_.item() / static_cast<double>(window_micro_);
    const double grad_norm = last_grad_norm_.defined() ? last_grad_norm_.item() : 0.0;
    profiler_->end_step(/*host_synced=*/true);
    log(loss, grad_norm);
  } else {
    profiler_->end_step(/*host_synced=*/false);
  }
  if (config_.eval_strategy == "steps" && step_ % config_.eval_steps == 0) periodic_eval(static_cast<double>(epoch_));
  if (config_.save_steps > 0 && step_ % config_.save_steps == 0 && !done()) save();
}

// A "train" record for the window since the last log, and the progress line.
void Job::log(double loss, double grad_norm) {
  const double elapsed = seconds_since(window_start_);
  const double samples_per_second = static_cast<double>(window_samples_ * world_) / std::max(elapsed, 1e-9);
  const double epoch = static_cast<double>(epoch_) +
                       static_cast<double>(batches_in_epoch_) / static_cast<double>(batches_per_epoch_);
  const double lr = scheduler_->last_lr()[0];
  nlohmann::json j = {{"kind", "train"},
                      {"step", step_},
                      {"epoch", epoch},
                      {"loss", loss},
                      {"learning_rate", lr},
                      {"grad_norm", grad_norm},
                      {"samples_per_second", samples_per_second},
                      {"mean_padded_length", static_cast<double>(window_positions_) /
                                                 static_cast<double>(std::max<int64_t>(window_rows_, 1))},
                      {"elapsed_s", seconds_since(job_start_)}};
  j.update(TrainProfiler::window_columns(profiler_->take_window()));
  const ddp::IterationStats none;
  const ddp::IterationStats& st = ddp_ ? ddp_->stats() : none;
  j["backward_comm_ms"] = st.backward_comm_ms;  // DDP's last synchronised iteration
  j["overlap_ms"] = st.overlap_ms;
  if (metrics_) metrics_->train(j);
  last_train_loss_ = loss;
  const int64_t window_steps =
      std::max<int64_t>(1, window_micro_ / config_.gradient_accumulation_steps);
  const double seconds_left = static_cast<double>(total_steps_ - step_) * elapsed / static_cast<double>(window_steps);
  progress_.step(step_, total_steps_, epoch, loss, lr, samples_per_second, seconds_left);
  window_loss_ = Tensor();
  window_micro_ = window_samples_ = window_rows_ = window_positions_ = 0;
  window_start_ = Clock::now();
}

// On every rank: rank 0 evaluates the eval split and chooses the model; with early stopping every
// rank learns rank 0's decision.
void Job::periodic_eval(double epoch) {
  bool stop = false;
  if (main_rank_) {
    const EvalResult e = run_eval(*eval_loader_, eval_split_, epoch);
    if (selection_) {
      if (selection_->observe(step_, e) && config_.load_best_model_at_end) {
        best_weights_.tensors.clear();
        for (const auto& [name, t] : model_->state_dict().tensors)
          best_weights_.tensors.emplace_back(name, t.detach().to(Device::cpu()).clone());
      }
      // At the last step there is nothing left to stop: the message would only confuse.
      stop = selection_->should_stop() && step_ < stop_at_;
      if (stop)
        progress_.say(fmt::format("early stopping: {} evaluations without {} improving by more than {} (best {:.4f} "
                                  "at step {})",
                                  selection_->evaluations_without_improvement(), selection_->metric(),
                                  config_.early_stopping_threshold, selection_->best_value(),
                                  *selection_->best_step()));
    }
  }
  last_eval_step_ = step_;
  if (config_.early_stopping_patience > 0) stop_requested_ = agree_with_rank0(stop);
}

// Rank 0's `decision`, on every rank (a broadcast; every rank calls this at the same point).
bool Job::agree_with_rank0(bool decision) {
  if (!group_ || world_ == 1) return decision;
  Tensor flag = Tensor::from_vector(std::vector<int64_t>{decision ? 1 : 0}, {1}, DType::I64, device_);
  TANDEM_CHECK(group_->broadcast(flag, 0)->wait(std::chrono::seconds(config_.ddp_timeout)),
               "rank {}: timed out after {} s waiting for rank 0's early-stopping decision", rank_,
               config_.ddp_timeout);
  return flag.to_int_vector()[0] != 0;
}

// load_best_model_at_end: rank 0 loads its copy of the best model and every rank takes rank 0's
// weights, so that the ranks still agree (DDP's invariant) and the final checkpoint is the best model.
void Job::restore_best_model() {
  if (main_rank_ && !best_weights_.tensors.empty()) {
    model_->load_state_dict(best_weights_);
    progress_.say(fmt::format("loaded the best model: step {}, {} {:.4f}", *selection_->best_step(),
                              selection_->metric(), selection_->best_value()));
  }
  if (!group_ || world_ == 1) return;
  for (auto& [name, t] : model_->state_dict().tensors) {
    Tensor dst = t.detach();
    TANDEM_CHECK(group_->broadcast(dst, 0)->wait(std::chrono::seconds(config_.ddp_timeout)),
                 "rank {}: timed out after {} s receiving the best model's {} from rank 0", rank_, config_.ddp_timeout,
                 name);
  }
}

// Rank 0: one pass over `loader`; a record (kind "eval", or "test" for the final test-split pass
// after validation evaluations) and a console line.
EvalResult Job::run_eval(data::DataLoader& loader, const char* split, double epoch, const char* kind) {
  const Clock::time_point t0 = Clock::now();
  EvalResult e = evaluate(*model_, loader, compute_, data_.train->num_classes());
  profiler_->host_span("eval", t0, Clock::now());
  const nlohmann::json j = {{"kind", kind},
                            {"split", split},
                            {"step", step_},
                            {"epoch", epoch},
                            {"eval_loss", e.loss},
                            {"eval_accuracy", e.accuracy},
                            {"eval_macro_f1", e.macro_f1},
                            {"eval_per_class_accuracy", e.per_class_accuracy},
                            {"eval_per_class_f1", e.per_class_f1},
                            {"elapsed_s", seconds_since(job_start_)}};
  if (std::string(kind) == "eval") {
    metrics_->eval(j);
  } else {
    metrics_->record(j);
  }
  progress_.say(fmt::format("{:<5} step {:>6}  epoch {:.2f}  {} loss {:.4f}  accuracy {:.4f}  macro-F1 {:.4f}", kind,
                            step_, epoch, split, e.loss, e.accuracy, e.macro_f1));
  return e;
}

// Rank 0: a checkpoint that --resume continues from at the current position in the data.
void Job::save() {
  if (!main_rank_) return;
  TrainerState s = state_;
  s.epoch = epoch_;
  s.sampler = train_loader_->state();
  s.sampler.epoch = epoch_;
  s.sampler.position = position_;
  s.scaler = scaler_.state_dict();
  const Clock::time_point t0 = Clock::now();
  // With ZeRO-1 the optimizer state is sharded over the ranks: the checkpoint keeps the model only.
  fs::path p = save_checkpoint(out_dir_, model_->state_dict(),
                               zero_ ? NamedTensors{} : to_named(optimizer_->state_dict()), s,
                               to_yaml(config_), vocab_file_, config_.save_total_limit);
  profiler_->host_span("checkpoint", t0, Clock::now());
  progress_.say(fmt::format("saved {}", p.string()));
}

TrainResult Job::finish() {
  profiler_->finish();
  if (metrics_ && ddp_) metrics_->record(ddp_record(*ddp_, "end"));  // now with the rebuilt buckets
  TrainResult r;
  r.class_names = data_.train->class_names;
  r.class_weights = class_weights_;
  for (const auto& [name, t] : optimizer_->state_dict())
    r.optimizer_state_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  if (powersgd_) {
    r.comm_hook_numel_before = powersgd_->numel_before_compression();
    r.comm_hook_numel_after = powersgd_->numel_after_compression();
  }
  r.steps = step_;
  r.train_loss = last_train_loss_;
  r.seconds = seconds_since(train_start_);
  r.samples_per_second = static_cast<double>(trained_samples_ * world_) / std::max(r.seconds, 1e-9);
  r.early_stopped = stop_requested_;
  r.stopped_early = step_ < total_steps_ && !stop_requested_;
  const double epoch = static_cast<double>(step_) / static_cast<double>(steps_per_epoch_);
  if (!r.stopped_early && selection_) {
    if (last_eval_step_ != step_) periodic_eval(epoch);  // the final model is a candidate too
    if (config_.load_best_model_at_end) restore_best_model();
  }
  r.weight_checksums = weight_checksums(*model_, group_.get());
  if (main_rank_) {
    if (!r.stopped_early) {
      // With a validation split, the test split is evaluated once, here; without, this is the last "eval".
      r.eval = test_loader_ ? run_eval(*test_loader_, "test", epoch, "test") : run_eval(*eval_loader_, "test", epoch);
      r.majority_baseline = data_.test->majority_fraction();
      if (selection_) {
        r.best_step = *selection_->best_step();
        r.best_metric = selection_->best_value();
        r.metric_for_best_model = selection_->metric();
      }
    }
    save();
  }
  return r;
}

}  // namespace

TrainResult train(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group,
                  const TrainerOptions& options) {
  validate(config);
  Job job(config, std::move(group), options);
  while (!job.done()) job.run_step();
  return job.finish();
}

}  // namespace tandem::train
