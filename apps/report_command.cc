// `tandem report`: tables, plots and a diagnosis from bench results and
// training runs (report/report.h lists the files).
//
//   tandem report --bench results/ [--run "2 ranks=runs/fortunes_demo"] --out results/report
//
// --bench is a folder holding any of buckets.json, scaling.json, step.json and
// find_batch_size.json; the training runs of `bench scaling --train` are
// picked up from it, and --run adds any `tandem train` output_dir.
//
// When the folder also holds `tandem bench allreduce` tables named
// allreduce_<N>ranks.txt for the bucket sweep's world size, the step model
// (docs/step-model.md) predicts every case of the sweep from the others and
// shows it next to its measurement: OUT/step_model.md, also printed.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "apps/step_prediction.h"
#include "core/atomic_file.h"
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

// The step model's section, or "" when the folder lacks its inputs: each case of the bucket sweep
// predicted from the mean calibration of the other cases (leave one out).
std::string step_model_section(const fs::path& bench, const report::BenchFolder& folder) {
  if (!folder.buckets || folder.buckets->cases.size() < 2) return "";
  const report::BucketsBench& b = *folder.buckets;
  const int n = b.cases.front().facts.world_size;
  const fs::path table = bench / fmt::format("allreduce_{}ranks.txt", n);
  if (!fs::exists(table) || b.cases.front().gradient_ready_ms.empty()) return "";
  const auto links = fit_links({report::read_allreduce_table(table)});
  const ddp::LinkFit link = link_for(links, n);
  std::vector<Calibration> all;
  for (const report::Profile& p : b.cases)
    all.push_back(calibrate(p, link, fmt::format("buckets.json:{}", p.facts.label)));
  std::vector<PredictionRow> rows;
  for (size_t i = 0; i < b.cases.size(); ++i) {
    std::vector<Calibration> others = all;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    rows.push_back(predict_measured(average(others), link, b.cases[i], /*first_cap_mb=*/1));
  }
  return fmt::format(
      "Step model (docs/step-model.md): each case predicted from the mean calibration of the others.\n\n{}\n{}\n"
      "predictions against the measurements:\n\n{}",
      links_markdown(links), calibrations_markdown({{n, average(all)}}), rows_markdown(rows));
}

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
  std::vector<fs::path> files = written;
  if (!a.bench.empty()) {
    const std::string model = step_model_section(a.bench, in.bench);
    if (!model.empty()) {
      write_file_atomically(out / "step_model.md", model);
      files.push_back(out / "step_model.md");
      if (!a.quiet) fmt::print("{}\n", model);
    }
  }
  fmt::print("# wrote {} files in {}:", files.size(), out.string());
  for (const fs::path& p : files) fmt::print(" {}", p.filename().string());
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
