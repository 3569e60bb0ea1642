// `tandem bench step`: training-step throughput and peak memory of a config
// in each precision.
//
//   tandem bench step --config configs/ag_news_small.yaml --precisions fp32,bf16,fp16 --out results/
//
// --synthetic runs on generated full-length rows instead of the config's data
// (train/synthetic_source.h); --synthetic-real-fraction F pads them to a mean
// of F real tokens per row, for what depends on the mask (trimmed attention
// key tiles).
//
// Runs --nproc ranks (1 by default) that time the step in every precision
// (cases rotated over --rounds) and report samples/s and the peak tensor
// memory of the largest rank: device memory on CUDA, the host tensor
// allocator's on the CPU. Writes OUT/step.json.
#include <fmt/format.h>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "core/check.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace {

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  int nproc = 1;
  std::string precisions = "fp32,bf16,fp16";
  int warmup = 5, steps = 20, rounds = 2;
  std::string backend;  // "": the config's ddp_backend
  bool synthetic = false;
  double synthetic_real_fraction = 1.0;
  std::string out = "bench_results";
  double timeout_s = 1800;
};

void run(const Args& a) {
  require_not_launched("bench step");
  std::vector<std::string> overrides = a.overrides;
  if (!a.backend.empty()) overrides.push_back("ddp_backend=" + a.backend);
  const train::TrainConfig config = train::load_train_config(a.config, overrides);
  validate(config);
  WorkerSpec spec;
  spec.config = a.config;
  spec.overrides = overrides;
  for (const std::string& p : split_list(a.precisions)) {
    TANDEM_CHECK(p == "fp32" || p == "bf16" || p == "fp16", "--precisions: '{}' (fp32, bf16 or fp16)", p);
    train::StepCase c = train::config_case(config, p);
    c.precision = p;
    spec.cases.push_back(c);
  }
  TANDEM_CHECK(!spec.cases.empty(), "--precisions: none given");
  spec.warmup = a.warmup;
  spec.steps = a.steps;
  spec.rounds = a.rounds;
  TANDEM_CHECK(a.synthetic || a.synthetic_real_fraction == 1.0, "--synthetic-real-fraction needs --synthetic");
  TANDEM_CHECK(a.synthetic_real_fraction > 0 && a.synthetic_real_fraction <= 1,
               "--synthetic-real-fraction must be in (0, 1], got {}", a.synthetic_real_fraction);  // before the ranks start
  spec.synthetic = a.synthetic;
  spec.synthetic_real_fraction = a.synthetic_real_fraction;
  spec.out_dir = (std::filesystem::path(a.out) / "step_run").string();
  fmt::print("# tandem bench step: {} rank(s), precisions {}, {} timed steps x {} rounds (after {} warm-up)\n", a.nproc,
             a.precisions, a.steps, a.rounds, a.warmup);
  std::fflush(stdout);

  report::StepBench b;
  b.meta = report::current_meta(command_line());
  b.rounds = a.rounds;
  b.cases = run_bench_ranks(a.nproc, spec, std::chrono::seconds(static_cast<int64_t>(a.timeout_s))).profiles();
  const std::filesystem::path file = std::filesystem::path(a.out) / "step.json";
  report::write_json(file, report::to_json(b));

  fmt::print("# {:>9}  {:>10}  {:>9}  {:>13}  {:>10}  {:>11}  {:>12}  {:>9}\n", "precision", "samples/s", "step ms",
             "p10-p90", "forward ms", "backward ms", "optimizer ms", "peak MiB");
  for (const report::Profile& p : b.cases)
    fmt::print("  {:>9}  {:>10.1f}  {:>9.2f}  {:>6.1f}-{:<6.1f}  {:>10.2f}  {:>11.2f}  {:>12.2f}  {:>9.1f}\n",
               p.facts.precision, p.samples_per_second, p.median.step_ms, p.step_ms.p10, p.step_ms.p90,
               p.median.forward_ms, p.median.backward_ms, p.median.optimizer_ms,
               static_cast<double>(p.peak_memory_bytes) / (1 << 20));
  const report::RunFacts& f = b.cases.front().facts;
  fmt::print("# {} device, batch {} per rank, {} sequences {}; wrote {}\n", f.device, f.per_device_batch,
             f.data_description(), f.length_description(), file.string());
}

}  // namespace

void add_bench_step_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("step", "Training-step throughput and peak memory per precision");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key");
  cmd->add_option("--nproc", a->nproc, "Ranks on this machine")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxLocalRanks));
  cmd->add_option("--precisions", a->precisions, "Comma-separated: fp32, bf16, fp16")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Untimed steps per precision")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps per precision and round")->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Repeats, in rotated order")->capture_default_str();
  cmd->add_option("--backend", a->backend, "ring, nccl or auto with --nproc > 1 (default: the config's ddp_backend)");
  cmd->add_flag("--synthetic", a->synthetic, "Random full-length sequences instead of the config's data");
  cmd->add_option("--synthetic-real-fraction", a->synthetic_real_fraction,
                  "With --synthetic: each row's mean share of real tokens, the rest padding (0, 1]")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Folder for step.json")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "Seconds before the run counts as hung")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
