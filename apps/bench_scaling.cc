// `tandem bench scaling`: throughput of 1..N ranks on this machine, the usual
// DDP scaling table.
//
//   tandem bench scaling --config configs/fortunes_demo.yaml --max-ranks 2 --out results/
//
// For each world size it starts that many ranks (apps/bench_ranks.h) and
// times the config's training step. Weak scaling (default) keeps the
// per-device batch, so the global batch grows with N; strong scaling keeps the
// global batch (--global-batch) and divides it. speedup = samples/s at N /
// samples/s at 1 (T1/TN per sample), efficiency = speedup / N. The world sizes
// are run --rounds times in rotated order. --train also runs the config's
// full training at each world size (output in OUT/train_<N>ranks) for the
// report's accuracy and epoch-time plots. Writes OUT/scaling.json.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "core/check.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  int max_ranks = 2;
  std::string world_sizes;  // overrides max_ranks: "1,2,4"
  std::string mode = "weak";
  int64_t global_batch = 0;
  int warmup = 5, steps = 20, rounds = 2;
  std::string backend;  // "": the config's ddp_backend
  bool synthetic = false;
  bool train = false;
  std::string out = "bench_results";
  double timeout_s = 3600;
};

std::vector<int> world_sizes(const Args& a) {
  std::vector<int> out;
  if (!a.world_sizes.empty()) {
    out = parse_rank_counts(a.world_sizes, "--world-sizes");
  } else {
    TANDEM_CHECK(a.max_ranks >= 1, "--max-ranks must be at least 1");
    for (int n = 1; n <= a.max_ranks; ++n) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void run(const Args& a) {
  require_not_launched("bench scaling");
  TANDEM_CHECK(a.mode == "weak" || a.mode == "strong", "--mode: '{}' (weak or strong)", a.mode);
  TANDEM_CHECK(a.rounds >= 1, "--rounds must be at least 1");
  const std::vector<int> sizes = world_sizes(a);
  std::vector<std::string> base = a.overrides;
  if (!a.backend.empty()) base.push_back("ddp_backend=" + a.backend);
  const train::TrainConfig config = train::load_train_config(a.config, base);
  validate(config);
  if (a.mode == "strong") {
    TANDEM_CHECK(a.global_batch > 0, "--mode strong needs --global-batch");
    for (int n : sizes)
      TANDEM_CHECK(a.global_batch % n == 0, "--global-batch {} is not divisible by {} ranks", a.global_batch, n);
  }
  fmt::print("# tandem bench scaling ({}): world sizes {}, {} backend, {} timed steps x {} rounds (after {} warm-up)\n",
             a.mode, fmt::join(sizes, ","), config.ddp_backend, a.steps, a.rounds, a.warmup);
  std::fflush(stdout);

  report::ScalingBench b;
  b.meta = report::current_meta(command_line());
  b.mode = a.mode;
  b.rounds = a.rounds;
  std::vector<std::optional<RankResults>> per_size(sizes.size());
  for (int round = 0; round < a.rounds; ++round) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % sizes.size();
      const int n = sizes[i];
      WorkerSpec spec;
      spec.config = a.config;
      spec.overrides = base;
      if (a.mode == "strong")
        spec.overrides.push_back(fmt::format("per_device_train_batch_size={}", a.global_batch / n));
      const train::TrainConfig c = train::load_train_config(a.config, spec.overrides);
      spec.cases = {train::config_case(c, fmt::format("{} rank{}", n, n > 1 ? "s" : ""))};
      spec.warmup = a.warmup;
      spec.steps = a.steps;
      spec.synthetic = a.synthetic;
      spec.out_dir = (fs::path(a.out) / fmt::format("scaling_run_{}ranks", n)).string();
      // The full training run (if asked) follows the last round's timing of this size.
      if (a.train && round + 1 == a.rounds) {
        spec.train_output_dir = (fs::path(a.out) / fmt::format("train_{}ranks", n)).string();
        b.runs.push_back({n, fmt::format("train_{}ranks", n)});
      }
      fmt::print("# {} rank(s), round {}/{}{}\n", n, round + 1, a.rounds,
                 spec.train_output_dir.empty() ? "" : " + training");
      std::fflush(stdout);
      RankResults r = run_bench_ranks(n, spec, std::chrono::seconds(static_cast<int64_t>(a.timeout_s)));
      if (per_size[i])
        per_size[i]->append(r);
      else
        per_size[i] = std::move(r);
    }
  }
  // Every round's steps pooled per world size.
  for (const auto& r : per_size) b.cases.push_back(r->profiles().front());
  const fs::path file = fs::path(a.out) / "scaling.json";
  report::write_json(file, report::to_json(b));

  fmt::print("# {:>5}  {:>10}  {:>8}  {:>10}  {:>9}  {:>13}  {:>10}  {:>9}  {:>10}  {:>8}  {:>9}\n", "ranks",
             "samples/s", "speedup", "efficiency", "step ms", "p10-p90", "compute ms", "comm ms", "exposed ms",
             "data ms", "epoch s");
  for (const report::ScalingRow& r : report::scaling_table(b.cases)) {
    const report::Profile& p = *std::find_if(
        b.cases.begin(), b.cases.end(), [&](const report::Profile& x) { return x.facts.world_size == r.world_size; });
    fmt::print(
        "  {:>5}  {:>10.1f}  {:>8.2f}  {:>9.0f}%  {:>9.2f}  {:>6.1f}-{:<6.1f}  {:>10.2f}  {:>9.2f}  {:>10.2f}  "
        "{:>8.2f}  {:>9.1f}\n",
        r.world_size, r.samples_per_second, r.speedup, 100 * r.efficiency, r.step_ms, p.step_ms.p10, p.step_ms.p90,
        p.compute_ms(), p.median.comm_ms, p.median.exposed_comm_ms, p.median.data_wait_ms, r.epoch_seconds);
  }
  fmt::print(
      "# speedup = samples/s at N / samples/s at 1 rank; efficiency = speedup / N; epoch s = epoch examples / "
      "samples/s\n# wrote {}\n",
      file.string());
}

}  // namespace

void add_bench_scaling_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("scaling", "Samples/s, speedup and efficiency for 1..N ranks on this machine");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key");
  cmd->add_option("--max-ranks", a->max_ranks, "World sizes 1..N")->capture_default_str();
  cmd->add_option("--world-sizes", a->world_sizes, "Explicit world sizes, comma-separated (instead of --max-ranks)");
  cmd->add_option("--mode", a->mode, "weak (fixed per-device batch) or strong (fixed --global-batch)")
      ->capture_default_str();
  cmd->add_option("--global-batch", a->global_batch, "strong mode: the global batch, divided among the ranks");
  cmd->add_option("--warmup", a->warmup, "Untimed steps per world size")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps per world size and round")->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Repeats of the sweep, in rotated order")->capture_default_str();
  cmd->add_option("--backend", a->backend, "ring, nccl or auto (default: the config's ddp_backend)");
  cmd->add_flag("--synthetic", a->synthetic, "Random full-length sequences instead of the config's data");
  cmd->add_flag("--train", a->train, "Also run the config's full training at each world size");
  cmd->add_option("--out", a->out, "Folder for scaling.json")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "Seconds before one world size's run counts as hung")
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
