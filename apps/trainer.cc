#include "apps/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/checkpoint.h"
#include "apps/train_profiler.h"
#include "apps/train_setup.h"
#include "comm/rank_env.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/stream.h"
#include "data/batch_source.h"
#include "data/data_loader.h"
#include "data/dataset_spec.h"
#include "data/tokenizer.h"
#include "ddp/distributed_data_parallel.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"

namespace tandem::apps {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using profile::Phase;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

NamedTensors to_named(const Optimizer::StateDict& state) {
  NamedTensors out;
  for (const auto& [name, t] : state) out.tensors.emplace_back(name, t);
  return out;
}

Optimizer::StateDict from_named(const NamedTensors& named) {
  Optimizer::StateDict out;
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

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// train_log.csv's columns: the first twelve as they always were, then the
// step profiler's (docs/profiling.md says what each one means).
const std::vector<std::string> kTrainColumns = {
    "step",         "epoch",     "loss",         "learning_rate", "grad_norm",    "samples_per_second",
    "forward_ms",   "backward_compute_ms",       "backward_comm_ms", "overlap_ms", "data_wait_ms",
    "elapsed_s",    "step_ms",   "h2d_ms",       "comm_wait_ms",  "optimizer_ms", "logging_ms",
    "other_ms",     "comm_ms",   "overlap_pct",  "peak_memory_mb"};

// A CSV cell: empty for null (no value, e.g. overlap_pct without communication).
std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) line += ',';
    line += cells[i];
  }
  return line;
}

// Appends records to metrics.jsonl and a CSV with a fixed header.
class MetricsWriter {
 public:
  MetricsWriter(const fs::path& dir, bool append) {
    const auto mode = append ? std::ios::app : std::ios::trunc;
    jsonl_.open(dir / "metrics.jsonl", mode);
    const bool new_train = !append || !fs::exists(dir / "train_log.csv");
    const bool new_eval = !append || !fs::exists(dir / "eval_log.csv");
    train_csv_.open(dir / "train_log.csv", mode);
    eval_csv_.open(dir / "eval_log.csv", mode);
    TANDEM_CHECK(jsonl_.good() && train_csv_.good() && eval_csv_.good(), "cannot write metrics under {}",
                 dir.string());
    if (new_train) {
      std::vector<std::string> header(kTrainColumns.begin(), kTrainColumns.end());
      train_csv_ << csv_line(header) << "\n";
    }
    if (new_eval) eval_csv_ << "step,epoch,eval_loss,eval_accuracy,elapsed_s\n";
  }
  void train(const nlohmann::json& j) {
    jsonl_ << j.dump() << "\n";
    jsonl_.flush();
    std::vector<std::string> cells;
    for (const auto& c : kTrainColumns) cells.push_back(csv_cell(j.value(c, nlohmann::json())));
    train_csv_ << csv_line(cells) << "\n";
    train_csv_.flush();
  }
  // A record for metrics.jsonl only (DDP's logging data).
  void record(const nlohmann::json& j) {
    jsonl_ << j.dump() << "\n";
    jsonl_.flush();
  }
  void eval(const nlohmann::json& j) {
    jsonl_ << j.dump() << "\n";
    jsonl_.flush();
    eval_csv_ << fmt::format("{},{:.4f},{:.6f},{:.6f},{:.2f}\n", j["step"].get<int64_t>(), j["epoch"].get<double>(),
                             j["eval_loss"].get<double>(), j["eval_accuracy"].get<double>(),
                             j["elapsed_s"].get<double>());
    eval_csv_.flush();
  }

 private:
  std::ofstream jsonl_, train_csv_, eval_csv_;
};

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

}  // namespace

EvalResult evaluate(const nn::TextClassifier& model, data::DataLoader& loader, DType compute, int64_t num_classes) {
  NoGradGuard no_grad;
  auto& m = const_cast<nn::TextClassifier&>(model);
  const bool was_training = m.is_training();
  m.train(false);
  EvalResult r;
  double loss_sum = 0;
  std::vector<int64_t> correct(static_cast<size_t>(num_classes), 0), total(static_cast<size_t>(num_classes), 0);
  loader.start_epoch(0);
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute;
  while (auto batch = loader.next()) {
    Tensor logits = m.forward(batch->ids, batch->mask, ctx);
    const int64_t n = batch->labels.size(0);
    loss_sum += cross_entropy(logits, batch->labels).item() * static_cast<double>(n);
    // Per-class accuracy needs the predictions on the host; eval batches are few.
    std::vector<double> l = logits.to_double_vector();
    std::vector<int64_t> y = batch->labels.to_int_vector();
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < num_classes; ++k)
        if (l[static_cast<size_t>(i * num_classes + k)] > l[static_cast<size_t>(i * num_classes + best)]) best = k;
      total[static_cast<size_t>(y[static_cast<size_t>(i)])]++;
      if (best == y[static_cast<size_t>(i)]) correct[static_cast<size_t>(best)]++;
    }
    r.examples += n;
  }
  int64_t all_correct = 0;
  for (int64_t k = 0; k < num_classes; ++k) {
    all_correct += correct[static_cast<size_t>(k)];
    r.per_class_accuracy.push_back(total[static_cast<size_t>(k)]
                                       ? static_cast<double>(correct[static_cast<size_t>(k)]) /
                                             static_cast<double>(total[static_cast<size_t>(k)])
                                       : 0.0);
  }
  r.loss = r.examples ? loss_sum / static_cast<double>(r.examples) : 0;
  r.accuracy = r.examples ? static_cast<double>(all_correct) / static_cast<double>(r.examples) : 0;
  m.train(was_training);
  return r;
}

TrainResult train(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> group,
                  const TrainerOptions& options) {
  validate(config);
  const Clock::time_point job_start = Clock::now();
  const int rank = group ? group->rank() : 0;
  const int world = group ? group->size() : 1;
  const bool main_rank = rank == 0;
  const bool tty = ::isatty(STDOUT_FILENO) && !options.quiet;
  auto say = [&](const std::string& line) {
    if (main_rank && !options.quiet) {
      if (tty) std::fputs("\r\033[K", stdout);
      std::fputs((line + "\n").c_str(), stdout);
      std::fflush(stdout);
    }
  };

  const fs::path out_dir = config.output_dir;
  if (main_rank) fs::create_directories(out_dir);
  // The GPU follows the local rank, as the nccl backend's does (not the global rank: nodes number their GPUs from 0).
  const Device device = pick_device(config, group ? comm::rank_info_from_env().local_rank : 0);
  if (device.is_cuda()) cuda::set_device(device.index);
  const DType compute = compute_dtype(config);

  // --- data -------------------------------------------------------------------------------
  auto train_set = std::make_shared<data::Dataset>(data::load_dataset(dataset_spec(config, "train", {})));
  auto test_set =
      std::make_shared<data::Dataset>(data::load_dataset(dataset_spec(config, "test", train_set->class_names)));
  train_set->validate();
  test_set->validate();
  auto tokenizer = std::make_shared<data::Tokenizer>(data::Tokenizer::build(*train_set, tokenizer_options(config)));
  const fs::path vocab_file = out_dir / tokenizer->file_name();
  if (main_rank) tokenizer->save(vocab_file);
  say(data::describe(*train_set, "train"));
  say(data::describe(*test_set, "test"));

  data::SamplerOptions sampler_options;
  sampler_options.world_size = world;
  sampler_options.rank = rank;
  sampler_options.seed = static_cast<uint64_t>(config.seed);
  sampler_options.shuffle = true;
  data::DataLoaderOptions loader_options;
  loader_options.batch_size = config.per_device_train_batch_size;
  loader_options.num_workers = static_cast<int>(config.dataloader_num_workers);
  loader_options.pin_memory = config.dataloader_pin_memory;
  loader_options.device = device;
  loader_options.timeout_seconds = static_cast<double>(config.ddp_timeout);
  loader_options.time_copies = device.is_cuda();  // the step profiler's h2d phase
  auto train_source =
      std::make_shared<data::TextClassificationSource>(train_set, tokenizer, config.model.max_seq_len);
  data::DataLoader train_loader(train_source, data::DistributedSampler(train_set->size(), sampler_options),
                                loader_options);

  // --- model, DDP, optimizer --------------------------------------------------------------
  const nn::TextClassifierConfig mc = model_config(config, tokenizer->vocab_size(), train_set->num_classes());
  auto model = std::make_shared<nn::TextClassifier>(mc, static_cast<uint64_t>(config.seed));
  model->to(device);
  model->train(true);

  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  if (group && world > 1) {
    const ddp::DDPOptions d = ddp_options(config);
    ddp = std::make_unique<ddp::DistributedDataParallel>(model, group, d);
  }
  auto optimizer = make_optimizer(config, *model);
  TrainProfiler prof(config, {rank, world, device, ddp.get(), group.get(), say});

  const int64_t accum = config.gradient_accumulation_steps;
  const int64_t batches_per_epoch = train_loader.num_batches();
  TANDEM_CHECK(batches_per_epoch > 0, "the training split has no batches on rank {}", rank);
  const int64_t steps_per_epoch = std::max<int64_t>(1, batches_per_epoch / accum);
  const int64_t total_steps = config.max_steps > 0
                                  ? config.max_steps
                                  : static_cast<int64_t>(std::ceil(config.num_train_epochs * steps_per_epoch));
  ScheduleConfig sc;
  sc.kind = parse_schedule_kind(config.lr_scheduler_type);
  sc.num_training_steps = total_steps;
  sc.warmup_steps = config.warmup_steps;
  sc.warmup_ratio = config.warmup_ratio;
  LRScheduler scheduler(*optimizer, sc);
  GradScaler scaler = GradScaler::for_compute_dtype(compute);

  // --- resume -----------------------------------------------------------------------------
  TrainerState state;
  state.seed = config.seed;
  state.world_size = world;
  state.class_names = train_set->class_names;
  if (!options.resume.empty()) {
    std::optional<fs::path> dir = options.resume == "latest" ? latest_checkpoint(out_dir)
                                                             : std::optional<fs::path>(options.resume);
    TANDEM_CHECK(dir.has_value(), "--resume latest: no checkpoint under {}", out_dir.string());
    Checkpoint ck = load_checkpoint(*dir);
    TANDEM_CHECK(ck.state.world_size == world, "checkpoint {} was written by {} ranks, this job has {}",
                 dir->string(), ck.state.world_size, world);
    model->load_state_dict(ck.model);
    optimizer->load_state_dict(from_named(ck.optimizer));
    if (ck.state.scaler) scaler.load_state_dict(*ck.state.scaler);
    scheduler.set_step(ck.state.global_step);
    state = ck.state;
    say(fmt::format("resumed from {} at step {}", dir->string(), state.global_step));
  }

  MetricsWriter* metrics = nullptr;
  std::unique_ptr<MetricsWriter> metrics_owner;
  if (main_rank) {
    write_file_atomically(out_dir / "config.yaml", to_yaml(config));
    metrics_owner = std::make_unique<MetricsWriter>(out_dir, !options.resume.empty());
    metrics = metrics_owner.get();
    if (ddp) metrics->record(ddp_record(*ddp, "start"));
  }

  // Evaluation runs on rank 0 over the whole test split, one process, no padding.
  data::SamplerOptions eval_sampler;
  eval_sampler.shuffle = false;
  data::DataLoaderOptions eval_options = loader_options;
  eval_options.batch_size = config.per_device_eval_batch_size;
  eval_options.num_workers = 0;
  auto test_source = std::make_shared<data::TextClassificationSource>(test_set, tokenizer, config.model.max_seq_len);
  std::unique_ptr<data::DataLoader> eval_loader;
  if (main_rank)
    eval_loader = std::make_unique<data::DataLoader>(test_source, data::DistributedSampler(test_set->size(), eval_sampler),
                                                     eval_options);

  auto run_eval = [&](int64_t step, double epoch) {
    const Clock::time_point t0 = Clock::now();
    EvalResult e = evaluate(*model, *eval_loader, compute, mc.num_classes);
    prof.host_span("eval", t0, Clock::now());
    nlohmann::json j = {{"kind", "eval"},
                        {"step", step},
                        {"epoch", epoch},
                        {"eval_loss", e.loss},
                        {"eval_accuracy", e.accuracy},
                        {"eval_per_class_accuracy", e.per_class_accuracy},
                        {"elapsed_s", seconds_since(job_start)}};
    metrics->eval(j);
    say(fmt::format("eval  step {:>6}  epoch {:.2f}  loss {:.4f}  accuracy {:.4f}", step, epoch, e.loss, e.accuracy));
    return e;
  };
  auto save = [&](int64_t epoch, int64_t position) {
    if (!main_rank) return;
    TrainerState s = state;
    s.epoch = epoch;
    s.sampler = train_loader.state();
    s.sampler.epoch = epoch;
    s.sampler.position = position;
    s.scaler = scaler.state_dict();
    const Clock::time_point t0 = Clock::now();
    fs::path p = save_checkpoint(out_dir, model->state_dict(), to_named(optimizer->state_dict()), s, to_yaml(config),
                                 vocab_file, config.save_total_limit);
    prof.host_span("checkpoint", t0, Clock::now());
    say(fmt::format("saved {}", p.string()));
  };

  // --- the loop ---------------------------------------------------------------------------
  TrainResult result;
  result.class_names = train_set->class_names;
  Tensor window_loss;  // device sum of the losses since the last log: read only when logging
  int64_t window_micro = 0, window_samples = 0;
  Clock::time_point window_start = Clock::now(), train_start = Clock::now();
  int64_t trained_samples = 0;
  Tensor last_norm;
  int64_t step = state.global_step;
  const int64_t first_epoch = state.epoch;
  int64_t last_epoch = first_epoch, last_position = 0;
  const int64_t stop_at =
      options.stop_after_steps > 0 ? std::min(total_steps, step + options.stop_after_steps) : total_steps;
  bool done = step >= stop_at;
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute;
  ctx.seed = static_cast<uint64_t>(config.seed) * 1000003u + static_cast<uint64_t>(rank);

  for (int64_t epoch = first_epoch; !done; ++epoch) {
    if (epoch == first_epoch && state.sampler.position > 0) train_loader.resume(state.sampler);
    else train_loader.start_epoch(epoch);
    int64_t micro = 0;
    int64_t consumed = epoch == first_epoch ? state.sampler.position : 0;
    while (!done) {
      prof.begin_step(step + 1);
      prof.enter(Phase::DataWait);
      std::optional<data::Batch> batch = train_loader.next();
      if (!batch) {
        prof.no_batch();
        break;
      }
      prof.on_batch(*batch);
      const bool last_micro = (micro + 1) % accum == 0;
      ctx.step = static_cast<uint64_t>(step);
      ctx.calls = static_cast<uint64_t>(micro % accum) << 8;  // distinct dropout streams per micro-step
      auto forward_backward = [&] {
        prof.enter(Phase::Forward);
        auto fwd = [&] { return model->forward(batch->ids, batch->mask, ctx); };
        Tensor logits = ddp ? ddp->forward(fwd) : fwd();
        Tensor loss = cross_entropy(logits, batch->labels, config.label_smoothing_factor);
        Tensor scaled = scaler.scale(accum > 1 ? scale(loss, 1.0 / static_cast<double>(accum)) : loss);
        {
          NoGradGuard no_grad;
          window_loss = window_loss.defined() ? add(window_loss, loss.detach()) : loss.detach().clone();
        }
        prof.enter(Phase::BackwardCompute);
        scaled.backward();  // with DDP, the end of the autograd pass enters comm_wait (TrainProfiler)
      };
      if (ddp && !last_micro) {
        auto guard = ddp->no_sync();
        forward_backward();
      } else {
        forward_backward();
      }
      ++micro;
      ++window_micro;
      const int64_t rows = batch->labels.size(0);
      window_samples += rows;
      trained_samples += rows;
      consumed += rows;
      if (!last_micro) continue;

      prof.enter(Phase::Optimizer);
      scaler.unscale_(*optimizer);
      if (config.max_grad_norm > 0) last_norm = clip_grad_norm_(optimizer->params(), config.max_grad_norm);
      scaler.step(*optimizer);
      scaler.update();
      scheduler.step();
      optimizer->zero_grad(!config.ddp_gradient_as_bucket_view);
      ++step;
      state.global_step = step;
      done = step >= stop_at;

      const bool log_now = step % config.logging_steps == 0 || done;
      double loss = 0, grad_norm = 0;
      if (log_now) {
        prof.enter(Phase::Logging);
        // The one host synchronisation of a logging step.
        loss = window_loss.item() / static_cast<double>(window_micro);
        grad_norm = last_norm.defined() ? last_norm.item() : 0.0;
      }
      prof.end_step(/*host_synced=*/log_now);
      if (log_now) {
        const double elapsed = seconds_since(window_start);
        const double sps = static_cast<double>(window_samples * world) / std::max(elapsed, 1e-9);
        nlohmann::json j = {{"kind", "train"},
                            {"step", step},
                            {"epoch", static_cast<double>(epoch) + static_cast<double>(micro) / batches_per_epoch},
                            {"loss", loss},
                            {"learning_rate", scheduler.last_lr()[0]},
                            {"grad_norm", grad_norm},
                            {"samples_per_second", sps},
                            {"elapsed_s", seconds_since(job_start)}};
        j.update(TrainProfiler::window_columns(prof.take_window()));
        const ddp::IterationStats empty;
        const ddp::IterationStats& st = ddp ? ddp->stats() : empty;
        j["backward_comm_ms"] = st.backward_comm_ms;  // DDP's last synchronised iteration
        j["overlap_ms"] = st.overlap_ms;
        if (metrics) metrics->train(j);
        result.train_loss = loss;
        const double eta = static_cast<double>(total_steps - step) * elapsed / static_cast<double>(
                                                                                    std::max<int64_t>(1, window_micro / accum));
        if (main_rank && !options.quiet) {
          std::string line = fmt::format("step {:>6}/{}  epoch {:.2f}  loss {:.4f}  lr {:.3g}  {:.0f} samples/s  ETA {}",
                                         step, total_steps, j["epoch"].get<double>(), loss, j["learning_rate"].get<double>(),
                                         sps, format_duration(eta));
          if (tty) {
            const int width = 24;
            const int filled = static_cast<int>(width * static_cast<double>(step) / static_cast<double>(total_steps));
            std::printf("\r\033[K[%s%s] %s", std::string(static_cast<size_t>(filled), '#').c_str(),
                        std::string(static_cast<size_t>(width - filled), ' ').c_str(), line.c_str());
            std::fflush(stdout);
          } else {
            say(line);
          }
        }
        window_loss = Tensor();
        window_micro = window_samples = 0;
        window_start = Clock::now();
      }
      if (config.eval_strategy == "steps" && step % config.eval_steps == 0 && main_rank) run_eval(step, epoch);
      if (config.save_steps > 0 && step % config.save_steps == 0 && !done) save(epoch, consumed);
    }
    last_epoch = epoch;
    last_position = consumed;
    // The loader ran dry: a whole epoch is done (a run that reached its last step evaluates below).
    if (!done && config.eval_strategy == "epoch" && main_rank) run_eval(step, static_cast<double>(epoch + 1));
    state.sampler.position = 0;
  }

  prof.finish();
  if (metrics && ddp) metrics->record(ddp_record(*ddp, "end"));  // now with the rebuilt buckets
  result.steps = step;
  result.seconds = seconds_since(train_start);
  result.samples_per_second = static_cast<double>(trained_samples * world) / std::max(result.seconds, 1e-9);
  result.stopped_early = step < total_steps;
  result.weight_checksums = weight_checksums(*model, group.get());
  if (main_rank) {
    if (!result.stopped_early) {
      result.eval = run_eval(step, static_cast<double>(step) / static_cast<double>(steps_per_epoch));
      result.majority_baseline = test_set->majority_fraction();
    }
    save(last_epoch, last_position);
  }
  return result;
}

}  // namespace tandem::apps
