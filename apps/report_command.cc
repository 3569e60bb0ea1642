// `tandem report`: tables, plots and a diagnosis from bench results and
// training runs (report/report.h lists the files).
//
//   tandem report --bench results/ [--run "2 ranks=runs/fortunes_demo"] --out results/report
//
// --bench is a folder holding any of buckets.json, scaling.json, step.json and
// find_batch_size.json; the training runs of `bench scaling --train` are
// picked up from it, and --run adds any `tandem train` output_dir.
#include <fmt/format.h>

#include <filesystem>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "core/check.h"
#include "report/report.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;

struct Args {
  std::string bench;
  std::vector<std::string> runs;
  std::string out;
  bool quiet = false;
};

void run(const Args& a) {
  report::ReportInputs in;
  if (!a.bench.empty()) in.bench = report::read_bench_folder(a.bench);
  if (in.bench.scaling)
    for (const report::TrainRun& r : in.bench.scaling->runs)
      in.runs.push_back(report::read_training_run(fs::path(a.bench) / r.dir,
                                                  fmt::format("{} rank{}", r.world_size, r.world_size > 1 ? "s" : "")));
  for (const std::string& spec : a.runs) {
    const size_t eq = spec.find('=');
    const std::string label = eq == std::string::npos ? fs::path(spec).filename().string() : spec.substr(0, eq);
    const std::string dir = eq == std::string::npos ? spec : spec.substr(eq + 1);
    in.runs.push_back(report::read_training_run(dir, label));
  }
  TANDEM_CHECK(in.bench.scaling || in.bench.buckets || in.bench.step || in.bench.batch_search || !in.runs.empty(),
               "tandem report: nothing to report: {} holds no buckets.json, scaling.json, step.json or "
               "find_batch_size.json, and no --run was given",
               a.bench.empty() ? std::string("--bench was not given") : a.bench);
  in.command = command_line();
  in.date = report::current_meta("").date;
  const fs::path out =
      a.out.empty() ? (a.bench.empty() ? fs::path("report") : fs::path(a.bench) / "report") : fs::path(a.out);
  std::string text;
  const std::vector<fs::path> written = report::write_report(in, out, &text);
  if (!a.quiet) fmt::print("{}\n", text);
  fmt::print("# wrote {} files in {}:", written.size(), out.string());
  for (const fs::path& p : written) fmt::print(" {}", p.filename().string());
  fmt::print("\n");
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "CSV, LaTeX, SVG plots and a diagnosis from bench results and runs");
  auto a = std::make_shared<Args>();
  cmd->add_option("--bench", a->bench, "Folder with buckets.json, scaling.json, step.json, find_batch_size.json");
  cmd->add_option("--run", a->runs, "A training run: LABEL=OUTPUT_DIR (or just the folder)");
  cmd->add_option("--out", a->out, "Where the report goes (default: BENCH/report)");
  cmd->add_flag("--quiet", a->quiet, "Do not print the text report");
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
