// `tandem bench ops`: where one rank's training step spends its time, op by op.
//
//   tandem bench ops --config configs/ag_news_small.yaml --synthetic --precision bf16 --out results/
//
// Runs the config's step in this process (one rank, no DDP) with an op
// profile (profile/op_profile.h) over the timed steps, the way PyTorch's
// profiler's key_averages() table does: each public op's forward and each
// autograd node's backward, its calls and milliseconds per step and its share
// of the mean step. On a GPU the op times are CUDA events on the compute
// stream. What no op holds (the optimizer, the data loader, host work between
// ops) is the last line. Writes OUT/ops.json.
#include <fmt/format.h>

#include <filesystem>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "core/check.h"
#include "profile/op_profile.h"
#include "report/bench_files.h"
#include "train/setup.h"
#include "train/step_runner.h"

namespace tandem::apps {

namespace {

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  std::string precision = "fp32";
  int warmup = 3, steps = 10;
  bool synthetic = false;
  double synthetic_real_fraction = 1.0;
  std::string out = "bench_results";
  int top = 25;
};

void run(const Args& a) {
  require_not_launched("bench ops");
  TANDEM_CHECK(a.precision == "fp32" || a.precision == "bf16" || a.precision == "fp16",
               "bench ops: --precision must be fp32, bf16 or fp16, got '{}'", a.precision);
  const train::TrainConfig config = train::load_train_config(a.config, a.overrides);
  validate(config);
  TANDEM_CHECK(!config.cuda_graph,
               "bench ops: cuda_graph: true replays one CUDA graph per step, whose ops cannot be timed one by one; "
               "run with --set cuda_graph=false");

  const Device device = train::pick_device(config, 0);  // the runner makes it this thread's
  profile::OpProfileOptions po;
  if (device.is_cuda()) po.device_timer = std::make_shared<profile::DeviceTimer>(device.index);
  profile::OpProfile ops(po);
  train::StepRunnerOptions ro;
  TANDEM_CHECK(a.synthetic || a.synthetic_real_fraction == 1.0, "--synthetic-real-fraction needs --synthetic");
  ro.synthetic = a.synthetic;
  ro.synthetic_real_fraction = a.synthetic_real_fraction;
  ro.ops = &ops;
  train::StepRunner runner(config, nullptr, ro);
  train::StepCase c = train::config_case(config, a.precision);
  c.precision = a.precision;
  fmt::print("# tandem bench ops: {}, precision {}, {} timed steps after {} warm-up, one rank\n", a.config,
             a.precision, a.steps, a.warmup);
  std::fflush(stdout);
  const std::vector<report::StepSample> samples = runner.run(c, a.warmup, a.steps);
  const report::RunFacts facts = runner.facts(c);
  // Means, as the op times are: the step's total is then the ops' plus the rest.
  double step_ms = 0;
  for (const report::StepSample& s : samples) step_ms += s.step_ms / static_cast<double>(samples.size());

  const std::vector<profile::OpRow> rows = ops.rows();
  nlohmann::json jrows = nlohmann::json::array();
  fmt::print("# {:<28} {:<8} {:>10} {:>9} {:>14}\n", "op", "pass", "calls/step", "ms/step", "share of step");
  for (size_t i = 0; i < rows.size(); ++i) {
    const profile::OpRow& r = rows[i];
    const double share = step_ms > 0 ? 100.0 * r.ms_per_step / step_ms : 0.0;
    if (static_cast<int>(i) < a.top)
      fmt::print("  {:<28} {:<8} {:>10.1f} {:>9.3f} {:>12.1f} %\n", r.name, r.backward ? "backward" : "forward",
                 r.calls_per_step, r.ms_per_step, share);
    jrows.push_back({{"op", r.name}, {"pass", r.backward ? "backward" : "forward"},
                     {"calls_per_step", r.calls_per_step}, {"ms_per_step", r.ms_per_step}});
  }
  if (static_cast<int>(rows.size()) > a.top) {
    double ms = 0;
    for (size_t i = static_cast<size_t>(a.top); i < rows.size(); ++i) ms += rows[i].ms_per_step;
    fmt::print("  {:<28} {:<8} {:>10} {:>9.3f} {:>12.1f} %\n", fmt::format("({} more)", rows.size() - a.top), "", "",
               ms, step_ms > 0 ? 100.0 * ms / step_ms : 0.0);
  }
  const double in_ops = ops.ms_per_step();
  fmt::print("# ops {:.3f} ms of a {:.3f} ms step (means); the rest, {:.3f} ms, is the optimizer, the data loader "
             "and host work between ops\n",
             in_ops, step_ms, step_ms - in_ops);
  fmt::print("# {} device, batch {}, {} sequences {}\n", facts.device, facts.per_device_batch,
             facts.data_description(), facts.length_description());

  const std::filesystem::path file = std::filesystem::path(a.out) / "ops.json";
  std::filesystem::create_directories(file.parent_path());
  report::write_json(file, {{"kind", "ops"},
                            {"meta", report::to_json(report::current_meta(command_line()))},
                            {"facts", report::to_json(facts)},
                            {"steps", ops.steps()},
                            {"step_ms_mean", step_ms},
                            {"ops_ms_per_step", in_ops},
                            {"ops", jrows}});
  fmt::print("# wrote {}\n", file.string());
}

}  // namespace

void add_bench_ops_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("ops", "Time per op (forward and backward) of one rank's training step");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key");
  cmd->add_option("--precision", a->precision, "fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Untimed steps")->capture_default_str()->check(CLI::Range(0, 1000000));
  cmd->add_option("--steps", a->steps, "Timed steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_flag("--synthetic", a->synthetic, "Random full-length sequences instead of the config's data");
  cmd->add_option("--synthetic-real-fraction", a->synthetic_real_fraction,
                  "With --synthetic: each row's mean share of real tokens, the rest padding (0, 1]")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Folder for ops.json")->capture_default_str();
  cmd->add_option("--top", a->top, "Rows to print (all go to ops.json)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
