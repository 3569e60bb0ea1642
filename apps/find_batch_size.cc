// `tandem find-batch-size`: the largest per_device_train_batch_size whose
// training step fits in memory.
//
//   tandem find-batch-size --config configs/ag_news_optimized.yaml [--memory-limit 8G]
//
// Each trial runs in a child process (this binary with --trial B): a fresh
// process per batch size means a failed allocation leaves nothing behind, and
// even the kernel's out-of-memory killer ends only the trial, never the
// search. A trial builds the model and optimizer and runs two training steps
// on synthetic full-length sequences (the worst case for memory: every row is
// max_seq_len tokens); it does not fit when an allocation fails (CUDA or host
// out of memory, caught and reported) or when its peak tensor memory is over
// --memory-limit. On the CPU the limit defaults to 80% of MemAvailable and is
// also enforced as the trial's address-space limit, so the host allocator
// fails cleanly instead of the machine swapping. One process, no DDP: with
// DDP each rank also holds gradient buckets of the gradients' size.
#include <fmt/format.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/batch_search.h"
#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "train/step_runner.h"
#include "comm/launcher.h"
#include "core/check.h"
#include "core/parse_number.h"
#include "core/stream.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  int64_t start = 8, max_batch = 65536, multiple_of = 1;
  std::string memory_limit;  // "" : the default
  int steps = 2;
  std::string out = "bench_results";
  double trial_timeout_s = 900;
  int64_t trial = 0;  // > 0: run one trial (the child)
  std::string trial_out;
};

int64_t parse_bytes(const std::string& text) {
  double unit = 1;
  std::string digits = text;
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K':
        unit = 1 << 10;
        digits.pop_back();
        break;
      case 'M':
        unit = 1 << 20;
        digits.pop_back();
        break;
      case 'G':
        unit = double(1 << 30);
        digits.pop_back();
        break;
      default: break;
    }
  }
  const double v = parse_double(digits).value_or(-1);
  TANDEM_CHECK(v > 0 && std::isfinite(v), "--memory-limit: '{}' is not a size (like 512M, 8G)", text);
  // Past int64 the conversion is undefined (it came out negative, and the limit was silently dropped).
  TANDEM_CHECK(v * unit <= 0x1p62, "--memory-limit: '{}' is more than 4 EiB", text);
  return static_cast<int64_t>(v * unit);
}

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "MemAvailable:") {
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

int64_t vm_size_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0;
  in >> pages;
  return pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// The child: one trial, its result as JSON in trial_out.
void run_child(const Args& a) {
  std::vector<std::string> overrides = a.overrides;
  overrides.push_back(fmt::format("per_device_train_batch_size={}", a.trial));
  const train::TrainConfig config = train::load_train_config(a.config, overrides);
  validate(config);
  const int64_t limit = a.memory_limit.empty() ? 0 : parse_bytes(a.memory_limit);
  if (limit > 0 && !cuda::available()) {
    // Room for the program itself and its threads' stacks beyond the tensor budget.
    const rlim_t as = static_cast<rlim_t>(vm_size_bytes() + limit + (int64_t{1} << 30));
    rlimit rl{as, as};
    TANDEM_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "find-batch-size: cannot set the trial's address-space limit");
  }
  const ProbeResult r = run_trial(
      [&] {
        train::StepRunnerOptions ro;
        ro.synthetic = true;
        train::StepRunner runner(config, nullptr, ro);
        runner.run(train::config_case(config, "trial"), 0, a.steps);
        return runner.peak_memory_bytes();
      },
      limit);
  report::write_json(a.trial_out, {{"fits", r.fits}, {"peak_bytes", r.peak_bytes}, {"error", r.error}});
}

// The parent's probe: a child process per trial.
ProbeResult probe_in_child(const Args& a, const std::string& limit_text, const fs::path& dir, int64_t batch) {
  const fs::path file = dir / fmt::format("trial_{}.json", batch);
  fs::remove(file);
  comm::LaunchOptions o;
  o.nproc_per_node = 1;
  o.command = {self_executable(),     "find-batch-size", "--config",    a.config,  "--trial",
               std::to_string(batch), "--trial-out",     file.string(), "--steps", std::to_string(a.steps)};
  if (!limit_text.empty()) {
    o.command.push_back("--memory-limit");
    o.command.push_back(limit_text);
  }
  for (const std::string& s : a.overrides) {
    o.command.push_back("--set");
    o.command.push_back(s);
  }
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.trial_timeout_s * 1000));
  const comm::LaunchResult r = comm::launch(o);
  if (r.exit_code == 0 && fs::exists(file)) {
    std::ifstream in(file);
    const nlohmann::json j = nlohmann::json::parse(in);
    fs::remove(file);
    return {j.at("fits").get<bool>(), j.at("peak_bytes").get<int64_t>(), j.at("error").get<std::string>()};
  }
  // Killed by SIGKILL: the kernel's out-of-memory killer (or the job timeout, which the message names).
  if (r.exit_code == 128 + 9 || r.exit_code == 124)
    return {false, 0, fmt::format("the trial process was stopped: {}", r.message)};
  TANDEM_FAIL(
      "find-batch-size: the trial with batch {} failed for a reason other than memory: {} (its error is "
      "printed above)",
      batch, r.message);
}

void run_parent(const Args& a) {
  require_not_launched("find-batch-size");
  const train::TrainConfig config = train::load_train_config(a.config, a.overrides);
  validate(config);
  const bool gpu = cuda::available() && config.device != "cpu";
  std::string limit_text = a.memory_limit;
  int64_t limit = limit_text.empty() ? 0 : parse_bytes(limit_text);
  if (limit == 0 && !gpu) {
    limit = mem_available_bytes() * 8 / 10;
    TANDEM_CHECK(limit > 0, "find-batch-size: cannot read MemAvailable from /proc/meminfo; pass --memory-limit");
    limit_text = std::to_string(limit);
  }
  const fs::path dir = fs::path(a.out) / "find_batch_size_run";
  fs::create_directories(dir);
  fmt::print(
      "# tandem find-batch-size: {} ({}), {} steps per trial on synthetic sequences of {} tokens{}\n", a.config,
      gpu ? "cuda" : "cpu", a.steps, config.model.max_seq_len,
      limit > 0 ? fmt::format(", limit {:.1f} MiB of tensor memory", static_cast<double>(limit) / (1 << 20)) : "");
  std::fflush(stdout);
  BatchSearchOptions so{a.start, a.max_batch, a.multiple_of};
  const BatchSearchResult r = search_max_batch(
      [&](int64_t b) {
        ProbeResult p = probe_in_child(a, limit_text, dir, b);
        fmt::print("  batch {:>6}: {}\n", b,
                   p.fits ? fmt::format("fits (peak {:.1f} MiB)", static_cast<double>(p.peak_bytes) / (1 << 20))
                          : "does not fit: " + p.error);
        std::fflush(stdout);
        return p;
      },
      so);
  report::BatchSearch out;
  out.meta = report::current_meta(command_line());
  out.config = a.config;
  out.device = gpu ? "cuda" : "cpu";
  out.memory_limit_bytes = limit;
  out.max_batch = r.max_batch;
  out.hit_upper_bound = r.hit_upper_bound;
  out.trials = r.trials;
  const fs::path file = fs::path(a.out) / "find_batch_size.json";
  report::write_json(file, report::to_json(out));
  if (r.max_batch == 0)
    fmt::print("# no batch size fits (not even {}); wrote {}\n", so.multiple_of, file.string());
  else
    fmt::print("# largest per_device_train_batch_size that fits: {}{}; wrote {}\n", r.max_batch,
               r.hit_upper_bound ? fmt::format(" (the --max-batch bound: more may fit)") : "", file.string());
}

}  // namespace

void add_find_batch_size_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("find-batch-size", "The largest per-device batch whose training step fits in memory");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key");
  cmd->add_option("--start", a->start, "First batch size tried")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  cmd->add_option("--max-batch", a->max_batch, "Largest batch size tried")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--multiple-of", a->multiple_of, "Only batch sizes that are multiples of this")
      ->capture_default_str();
  cmd->add_option("--memory-limit", a->memory_limit,
                  "Tensor memory a step may use (512M, 8G); default: the GPU's, or 80% of MemAvailable on the CPU");
  cmd->add_option("--steps", a->steps, "Training steps per trial")->capture_default_str();
  cmd->add_option("--out", a->out, "Folder for find_batch_size.json")->capture_default_str();
  cmd->add_option("--trial-timeout", a->trial_timeout_s, "Seconds before one trial counts as hung")
      ->capture_default_str();
  cmd->add_option("--trial", a->trial, "(internal) run one trial with this batch")->group("");
  cmd->add_option("--trial-out", a->trial_out, "(internal) the trial's result file")->group("");
  cmd->callback([a] {
    if (a->trial > 0)
      run_child(*a);
    else
      run_parent(*a);
  });
}

}  // namespace tandem::apps
