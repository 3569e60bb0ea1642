// The step profiler as `tandem train` uses it (docs/profiling.md).
//
// Every step is timed phase by phase (profile/step_profiler.h); at each
// logging step the steps since the previous one become the metrics line's
// phase columns (window_columns). A detailed window of `profile_steps` steps,
// after `profile_skip_first`, keeps each step's record and spans; when it
// closes, every rank writes profile_rank<R>.json (summary and per-step
// records) and, with `trace: true`, trace_rank<R>.json into `profile_dir`;
// the ranks meet at a barrier and rank 0 merges the traces into trace.json
// and prints the summary table.
//
// On a GPU the window synchronises the device when it opens (to put device
// times on the host clock), waits on the host for each step's all-reduce
// times and synchronises when it closes. Outside the window profiling never
// synchronises: device times are read at logging steps, after the loss
// read-back has synchronised anyway.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/step.h"
#include "comm/process_group.h"
#include "core/device.h"
#include "data/data_loader.h"
#include "ddp/distributed_data_parallel.h"
#include "profile/step_profiler.h"
#include "profile/summary.h"
#include "profile/trace.h"

namespace tandem::train {

class TrainProfiler final : public StepObserver {
 public:
  struct Context {
    int rank = 0;
    int world_size = 1;
    Device device = Device::cpu();
    ddp::DistributedDataParallel* ddp = nullptr;  // null for a single process
    comm::ProcessGroup* group = nullptr;          // null for a single process
    std::function<void(const std::string&)> say;  // rank 0's console lines
  };
  TrainProfiler(const TrainConfig& config, Context context);
  ~TrainProfiler();
  TrainProfiler(const TrainProfiler&) = delete;
  TrainProfiler& operator=(const TrainProfiler&) = delete;

  // The loop, in order: begin_step (once per optimizer step, numbered as the
  // metrics number it), then the TrainStep's enter(phase) and on_batch calls
  // (no_batch where the loader ran dry instead), enter(Logging) on a logging
  // step, end_step.
  void begin_step(int64_t step);
  bool in_step() const { return steps_.in_step(); }
  void enter(profile::Phase phase) override { steps_.enter(phase); }
  void on_batch(const data::Batch& batch, bool synchronised) override;
  void no_batch();  // the epoch ran dry
  // `host_synced`: the host has just waited for the device (a logging step's loss read-back).
  void end_step(bool host_synced);
  // Something between steps (evaluation, a checkpoint), on the trace's host lane while the window is open.
  void host_span(const std::string& name, profile::Clock::time_point start, profile::Clock::time_point end);

  // The steps completed since the previous call, summarised.
  profile::Summary take_window();
  // End of training: closes a window that is still open.
  void finish();

  // The metrics keys a logging step adds (docs/profiling.md lists them).
  static nlohmann::json window_columns(const profile::Summary& window);

  const std::filesystem::path& dir() const { return dir_; }

 private:
  bool window_open() const { return window_started_ && !window_closed_; }
  void collect();
  void close_window();
  void write_rank_files();

  TrainConfig config_;
  Context ctx_;
  std::filesystem::path dir_;
  std::shared_ptr<profile::DeviceTimer> timer_;
  profile::StepProfiler steps_;
  profile::ClockOrigin origin_;
  std::unique_ptr<profile::Trace> trace_;
  int64_t first_step_ = -1;  // the first step this run profiled (a resumed run starts late)
  int64_t current_step_ = 0;
  bool detailed_ = false;
  bool synced_ = false;  // DDP's end-of-autograd hook ran in this step
  bool window_started_ = false, window_closed_ = false;
  std::vector<profile::StepRecord> window_;    // since the last take_window()
  std::vector<profile::StepRecord> detailed_records_;
};

}  // namespace tandem::train
