#include "train/profiler.h"

#include <fmt/format.h>

#include "train/checkpoint.h"
#include "train/trace_files.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/stream.h"
#include "profile/comm_sample.h"
#include "profile/step_trace.h"

namespace tandem::train {

namespace fs = std::filesystem;
using profile::Phase;

namespace {

profile::StepProfilerOptions profiler_options(Device device, std::shared_ptr<profile::DeviceTimer> timer) {
  profile::StepProfilerOptions o;
  o.device_timer = std::move(timer);
  if (device.is_cuda()) {
    const int index = device.index;
    o.peak_memory = [index] { return cuda_memory::stats(index).peak_with_graphs(); };
    o.reset_peak_memory = [index] { cuda_memory::reset_peak(index); };
  } else {
    o.peak_memory = [] { return host_memory::stats().peak_in_use; };
    o.reset_peak_memory = [] { host_memory::reset_peak(); };
  }
  return o;
}

}  // namespace

TrainProfiler::TrainProfiler(const TrainConfig& config, Context context)
    : config_(config),
      ctx_(std::move(context)),
      dir_(config.profile_dir.empty() ? fs::path(config.output_dir) : fs::path(config.profile_dir)),
      timer_(ctx_.device.is_cuda() ? std::make_shared<profile::DeviceTimer>(ctx_.device.index) : nullptr),
      steps_(profiler_options(ctx_.device, timer_)),
      origin_(profile::ClockOrigin::now()) {
  if (config_.trace) trace_ = std::make_unique<profile::Trace>(ctx_.rank, ctx_.world_size, origin_);
  // The exposed communication wait starts where the autograd pass ends and DDP starts waiting for buckets.
  // (A rank on which backward reached no parameter finishes the iteration from the next forward: that
  // wait stays in forward.)
  if (ctx_.ddp) {
    ctx_.ddp->set_autograd_end_hook([this] {
      if (!steps_.in_step()) return;
      synced_ = true;
      if (steps_.current() == Phase::BackwardCompute) steps_.enter(Phase::CommWait);
    });
  }
}

TrainProfiler::~TrainProfiler() {
  if (ctx_.ddp) ctx_.ddp->set_autograd_end_hook(nullptr);
}

void TrainProfiler::begin_step(int64_t step) {
  if (steps_.in_step()) return;
  if (first_step_ < 0) first_step_ = step;
  const int64_t k = step - first_step_ - config_.profile_skip_first;  // position in the detailed window
  detailed_ = config_.profile_steps > 0 && k >= 0 && k < config_.profile_steps;
  if (detailed_ && !window_started_) {
    window_started_ = true;
    if (timer_) timer_->anchor();  // the one synchronisation that opens the window
  }
  current_step_ = step;
  synced_ = false;
  steps_.begin_step(step, detailed_);
}

void TrainProfiler::on_batch(const data::Batch& batch, bool /*synchronised: DDP's hook tells*/) {
  steps_.count_micro_step();
  if (batch.copy_start && batch.copy_end) steps_.add_device_interval(Phase::H2D, batch.copy_start, batch.copy_end);
  if (detailed_ && trace_) profile::trace_batch(*trace_, batch);
}

void TrainProfiler::no_batch() {
  if (steps_.micro_steps() == 0) steps_.abandon_step();  // the next epoch's first batch starts it afresh
  else steps_.leave();  // a step with leftover micro-steps goes on in the next epoch
}

void TrainProfiler::end_step(bool host_synced) {
  if (ctx_.ddp && synced_) {
    // NCCL may still be finishing this step's all-reduces: their times are read only
    // where the host has waited anyway, or inside the window (which asked for it).
    const ddp::IterationStats& st = (host_synced || detailed_) ? ctx_.ddp->complete_stats() : ctx_.ddp->stats();
    if (st.comm_complete) {
      const profile::CommSample c = profile::comm_sample(st);
      steps_.add_comm(c.busy_ms, c.overlap_ms);
    }
    if (detailed_ && trace_) profile::trace_buckets(*trace_, current_step_, st, ctx_.ddp->bucket_parameter_names());
  }
  steps_.end_step();
  const bool last_of_window =
      detailed_ && current_step_ - first_step_ - config_.profile_skip_first == config_.profile_steps - 1;
  if (last_of_window) {
    close_window();
  } else {
    collect();
  }
}

void TrainProfiler::host_span(const std::string& name, profile::Clock::time_point start,
                              profile::Clock::time_point end) {
  if (trace_ && window_open()) trace_->span(profile::lane::kHost, name, start, end);
}

void TrainProfiler::collect() {
  for (profile::StepRecord& r : steps_.collect()) {
    if (r.detailed) {
      if (trace_) profile::trace_step(*trace_, r);
      r.spans.clear();
      detailed_records_.push_back(r);
    }
    window_.push_back(std::move(r));
  }
}

profile::Summary TrainProfiler::take_window() {
  collect();
  profile::Summary s = profile::summarize(window_);
  window_.clear();
  return s;
}

void TrainProfiler::finish() {
  if (config_.profile_steps <= 0) return;
  if (window_open()) {
    close_window();
  } else if (!window_started_) {
    if (ctx_.say)
      ctx_.say(fmt::format("profile: no step was profiled (profile_skip_first is {}, and the run ended first)",
                           config_.profile_skip_first));
  }
}

void TrainProfiler::close_window() {
  window_closed_ = true;
  if (timer_) cuda::device_synchronize();  // the window's last device times
  collect();
  TANDEM_CHECK(steps_.pending() == 0, "profile (rank {}): {} step(s) still have unfinished device events",
               ctx_.rank, steps_.pending());
  write_rank_files();
  if (ctx_.group) {
    auto work = ctx_.group->barrier();
    TANDEM_CHECK(work->wait(std::chrono::seconds(config_.ddp_timeout)),
                 "profile (rank {}): timed out after {} s waiting for the other ranks to write their profiles",
                 ctx_.rank, config_.ddp_timeout);
  }
  if (ctx_.rank != 0) return;
  const profile::Summary s = profile::summarize(detailed_records_);
  if (ctx_.say) {
    ctx_.say(fmt::format("step profile, rank 0, {} step(s) ({} timing):", s.steps,
                         s.device_timed ? "GPU event" : "host clock"));
    std::string table = profile::format_table(s);
    if (!table.empty() && table.back() == '\n') table.pop_back();
    ctx_.say(table);
    ctx_.say(fmt::format("profile: {}", (dir_ / "profile_rank0.json").string()));
  }
  if (!trace_) return;
  std::vector<fs::path> files;
  for (int r = 0; r < ctx_.world_size; ++r) {
    fs::path f = dir_ / fmt::format("trace_rank{}.json", r);
    if (!fs::exists(f)) {
      if (ctx_.say)
        ctx_.say(fmt::format("trace: {} is missing here (ranks on other machines?); copy the files together and run "
                             "`tandem trace merge DIR`",
                             f.string()));
      return;
    }
    files.push_back(f);
  }
  merge_trace_files(files, dir_ / "trace.json");
  if (ctx_.say) ctx_.say(fmt::format("trace: {} (open in https://ui.perfetto.dev)", (dir_ / "trace.json").string()));
}

void TrainProfiler::write_rank_files() {
  fs::create_directories(dir_);
  nlohmann::json steps = nlohmann::json::array();
  for (const profile::StepRecord& r : detailed_records_) steps.push_back(profile::to_json(r));
  nlohmann::json j = {{"rank", ctx_.rank},
                      {"world_size", ctx_.world_size},
                      {"device", ctx_.device.str()},
                      {"backend", ctx_.group ? ctx_.group->backend_name() : "none"},
                      {"profile_steps", config_.profile_steps},
                      {"profile_skip_first", config_.profile_skip_first},
                      {"summary", profile::to_json(profile::summarize(detailed_records_))},
                      {"steps", steps}};
  write_file_atomically(dir_ / fmt::format("profile_rank{}.json", ctx_.rank), j.dump(2) + "\n");
  if (trace_)
    write_file_atomically(dir_ / fmt::format("trace_rank{}.json", ctx_.rank), trace_->to_json().dump() + "\n");
}

nlohmann::json TrainProfiler::window_columns(const profile::Summary& w) {
  nlohmann::json j;
  j["step_ms"] = w.step_ms.mean;
  for (Phase p : profile::kAllPhases) j[std::string(profile::phase_name(p)) + "_ms"] = w.phase(p).mean;
  j["other_ms"] = w.other_ms.mean;
  j["comm_ms"] = w.comm_steps > 0 ? nlohmann::json(w.comm_ms.mean) : nlohmann::json();
  j["overlap_pct"] = w.overlap_pct ? nlohmann::json(*w.overlap_pct) : nlohmann::json();
  j["peak_memory_mb"] = static_cast<double>(w.peak_memory_bytes) / (1024.0 * 1024.0);
  j["timing"] = w.device_timed ? "device" : "host";
  return j;
}

}  // namespace tandem::train
