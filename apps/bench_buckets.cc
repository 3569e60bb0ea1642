// `tandem bench buckets`: DDP step time across gradient bucket sizes.
//
//   tandem bench buckets --config configs/fortunes_demo.yaml --nproc 2 --out results/
//
// Starts --nproc ranks (apps/bench_ranks.h) that time the config's training
// step for every ddp_bucket_cap_mb in --caps ("one" = a single bucket for
// all gradients), the whole sweep repeated --rounds times in rotated order so
// that drift on a shared machine does not favour one size. Prints, per size:
// buckets, step time (median and p10-p90), exposed all-reduce, overlap, and
// the fastest size; writes OUT/buckets.json for `tandem report`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "core/check.h"
#include "core/parse_number.h"
#include "report/bench_files.h"
#include "report/diagnosis.h"
#include "report/report.h"

namespace tandem::apps {

namespace {

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  int nproc = 2;
  std::string caps = "0.5,1,5,10,25,50,100,one";
  int warmup = 5, steps = 20, rounds = 2;
  std::string backend;  // "": the config's ddp_backend
  bool synthetic = false;
  std::string out = "bench_results";
  double timeout_s = 1800;
};

train::StepCase parse_cap(const std::string& text, const train::TrainConfig& config) {
  train::StepCase c = train::config_case(config, text);
  if (text == "one" || text == "inf") {
    c.one_bucket = true;
    c.label = "one bucket";
    return c;
  }
  const std::optional<double> mb = parse_double(text);
  TANDEM_CHECK(mb && *mb > 0, "--caps: '{}' is not a positive size in MB (or 'one')", text);
  c.bucket_cap_mb = *mb;
  c.label = fmt::format("{:g}", c.bucket_cap_mb);
  return c;
}

void run(const Args& a) {
  require_not_launched("bench buckets");
  TANDEM_CHECK(a.nproc >= 2, "bench buckets: --nproc must be at least 2 (buckets exist only with DDP)");
  TANDEM_CHECK(a.rounds >= 1, "bench buckets: --rounds must be at least 1, got {}", a.rounds);
  std::vector<std::string> overrides = a.overrides;
  if (!a.backend.empty()) overrides.push_back("ddp_backend=" + a.backend);
  const train::TrainConfig config = train::load_train_config(a.config, overrides);
  validate(config);
  WorkerSpec spec;
  spec.config = a.config;
  spec.overrides = overrides;
  for (const std::string& cap : split_list(a.caps)) spec.cases.push_back(parse_cap(cap, config));
  TANDEM_CHECK(!spec.cases.empty(), "--caps: no bucket sizes given");
  spec.warmup = a.warmup;
  spec.steps = a.steps;
  spec.rounds = a.rounds;
  spec.synthetic = a.synthetic;
  spec.out_dir = (std::filesystem::path(a.out) / "buckets_run").string();
  fmt::print("# tandem bench buckets: {} ranks, {} backend, {} sizes x {} rounds x {} timed steps (after {} warm-up)\n",
             a.nproc, config.ddp_backend, spec.cases.size(), a.rounds, a.steps, a.warmup);
  std::fflush(stdout);

  report::BucketsBench b;
  b.meta = report::current_meta(command_line());
  b.current_cap_mb = config.ddp_bucket_cap_mb;
  b.rounds = a.rounds;
  b.cases = run_bench_ranks(a.nproc, spec, std::chrono::seconds(static_cast<int64_t>(a.timeout_s))).profiles();
  report::write_json(std::filesystem::path(a.out) / "buckets.json", report::to_json(b));

  const report::Profile& p0 = b.cases.front();
  fmt::print("# gradients: {:.2f} MB ({} parameters); config ddp_bucket_cap_mb = {:g}\n", p0.facts.gradient_mb(),
             p0.facts.num_parameters, b.current_cap_mb);
  fmt::print("# {:>11}  {:>7}  {:>9}  {:>13}  {:>9}  {:>9}  {:>10}  {:>7}  {:>12}\n", "cap (MB)", "buckets", "step ms",
             "p10-p90", "samples/s", "comm ms", "exposed ms", "overlap", "compute/comm");
  for (const report::Profile& p : b.cases) {
    const double overlap = p.median.comm_ms > 0 ? 100 * p.median.overlap_ms / p.median.comm_ms : 0;
    fmt::print("  {:>11}  {:>7}  {:>9.2f}  {:>6.1f}-{:<6.1f}  {:>9.1f}  {:>9.2f}  {:>10.2f}  {:>6.0f}%  {:>12.2f}\n",
               p.facts.label, p.facts.bucket_bytes.size(), p.median.step_ms, p.step_ms.p10, p.step_ms.p90,
               p.samples_per_second, p.median.comm_ms, p.median.exposed_comm_ms, overlap,
               report::compute_comm_ratio(p));
  }
  const report::BucketSweepFacts f = report::bucket_sweep_facts(b);
  fmt::print("# fastest: {} ({:.2f} ms per step, noise +-{:.2f} ms){}\n", f.best_label, f.best_step_ms, f.noise_ms,
             f.current_step_ms > 0
                 ? fmt::format("; the config's {:g} MB: {:.2f} ms", f.current_cap_mb, f.current_step_ms)
                 : "");
  fmt::print("# wrote {}\n", (std::filesystem::path(a.out) / "buckets.json").string());
}

}  // namespace

void add_bench_buckets_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("buckets", "DDP step time across ddp_bucket_cap_mb sizes (starts its own ranks)");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key: --set per_device_train_batch_size=32");
  cmd->add_option("--nproc", a->nproc, "Ranks on this machine")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxLocalRanks));
  cmd->add_option("--caps", a->caps, "Bucket sizes in MB, comma-separated; 'one' = a single bucket")
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Untimed steps per size")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps per size and round")->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Repeats of the whole sweep, in rotated order")->capture_default_str();
  cmd->add_option("--backend", a->backend, "ring, nccl or auto (default: the config's ddp_backend)");
  cmd->add_flag("--synthetic", a->synthetic, "Random full-length sequences instead of the config's data");
  cmd->add_option("--out", a->out, "Folder for buckets.json")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "Seconds before the run counts as hung")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
