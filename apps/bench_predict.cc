// `tandem bench predict`: DDP step time for bucket caps and world sizes from
// the step model (ddp/step_model.h, docs/step-model.md).
//
//   tandem bench predict --calibrate b2/buckets.json:1 --link ar2.txt --link ar4.txt
//       --caps 0.25,1,4,one --world 2,4          (one command line)
//   tandem bench predict --calibrate b2/buckets.json:1 ... --measured b2 --measured b4 --json v.json
//
// --calibrate names measured profiles (a bench folder or file, optionally
// :LABEL for one case) that give the model its compute, gradient ready times
// and overheads; several at one world size are averaged; a world size with
// none uses the nearest calibrated one at or above the core count, scaled
// (scale_to_world).
// --link gives `tandem bench allreduce` tables, one per world size (N=FILE when
// the file has no header). With --measured, every case found there is
// predicted and shown next to its measurement with the error, from the
// calibrations other than itself (leave one out: a case that is its world
// size's only calibration is not validated, and is listed).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "apps/bench_ranks.h"
#include "apps/commands.h"
#include "apps/step_prediction.h"
#include "core/check.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Args {
  std::vector<std::string> calibrate, links, measured;
  std::string caps, worlds;
  double first_cap_mb = 1;  // DDPOptions' first_bucket_cap_mb, which the benches keep
  int cores = 0;            // 0: the calibration file's machine
  std::string json_out;
};

struct SourcedProfile {
  report::Profile profile;
  std::string file;  // the bench file it came from
  std::string source;
  int cores = 0;
  double load_average = 0;
};

// PATH or PATH:LABEL; PATH a bench folder or one of its files.
std::vector<SourcedProfile> read_profiles(const std::string& spec) {
  std::string path = spec, label;
  if (!fs::exists(path)) {
    const size_t colon = spec.rfind(':');
    if (colon != std::string::npos) {
      path = spec.substr(0, colon);
      label = spec.substr(colon + 1);
    }
  }
  TANDEM_CHECK(fs::exists(path), "{}: no such bench folder or file", path);
  std::vector<std::pair<std::string, report::BenchFolder>> files;
  if (fs::is_directory(path)) {
    for (const char* name : {"buckets.json", "scaling.json", "step.json"}) {
      const fs::path f = fs::path(path) / name;
      if (!fs::exists(f)) continue;
      report::BenchFolder one;
      report::read_bench_file(f, one);
      files.emplace_back(f.string(), std::move(one));
    }
    TANDEM_CHECK(!files.empty(), "{}: no buckets.json, scaling.json or step.json", path);
  } else {
    report::BenchFolder one;
    report::read_bench_file(path, one);
    files.emplace_back(path, std::move(one));
  }
  std::vector<SourcedProfile> out;
  for (const auto& [file, folder] : files) {
    auto add = [&, file = file](const std::vector<report::Profile>& cases, const report::BenchMeta& meta) {
      for (const report::Profile& p : cases)
        if (label.empty() || p.facts.label == label)
          out.push_back(
              {p, file, fmt::format("{}:{}", file, p.facts.label), meta.machine.cores, meta.machine.load_average});
    };
    if (folder.buckets) add(folder.buckets->cases, folder.buckets->meta);
    if (folder.scaling) add(folder.scaling->cases, folder.scaling->meta);
    if (folder.step) add(folder.step->cases, folder.step->meta);
  }
  TANDEM_CHECK(!out.empty(), "{}: no case{}", spec, label.empty() ? "" : fmt::format(" labelled '{}'", label));
  return out;
}

report::AllreduceTable read_link(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq != std::string::npos && !fs::exists(spec)) {
    int n = 0;
    try {
      n = std::stoi(spec.substr(0, eq));
    } catch (const std::exception&) {
      TANDEM_FAIL("--link {}: expected FILE or N=FILE", spec);
    }
    return report::read_allreduce_table(spec.substr(eq + 1), n);
  }
  return report::read_allreduce_table(spec);
}

// The calibration for `world`: the mean of its own, or of the nearest world size's at or above `cores`
// ranks, scaled; never using the case `except` (the one being validated). nullopt when `except` is the
// only calibration at `world`.
std::optional<Calibration> calibration_for(const std::map<int, std::vector<Calibration>>& cal, int world, int cores,
                                           const std::string& except = "") {
  auto without = [&](const std::vector<Calibration>& cs) {
    std::vector<Calibration> out;
    for (const Calibration& c : cs)
      if (c.source != except) out.push_back(c);
    return out;
  };
  const auto it = cal.find(world);
  if (it != cal.end()) {
    const std::vector<Calibration> cs = without(it->second);
    if (cs.empty()) return std::nullopt;
    return average(cs);
  }
  const std::vector<Calibration>* best = nullptr;
  for (const auto& [n, cs] : cal)
    if (n >= cores && (!best || std::abs(n - world) < std::abs(best->front().world_size - world))) best = &cs;
  std::vector<int> have;
  for (const auto& [n, c] : cal) have.push_back(n);
  TANDEM_CHECK(best != nullptr && world >= cores,
               "no calibration for {} ranks (--calibrate gives {} ranks, {} cores): compute can only be scaled "
               "between world sizes of at least the core count",
               world, fmt::join(have, ", "), cores);
  return scale_to_world(average(*best), world, cores);
}

void run(const Args& a) {
  TANDEM_CHECK(!a.calibrate.empty(), "--calibrate: give at least one measured profile");
  TANDEM_CHECK(!a.measured.empty() || (!a.caps.empty() && !a.worlds.empty()),
               "give --caps and --world to predict, or --measured to validate");
  std::vector<report::AllreduceTable> tables;
  for (const std::string& l : a.links) tables.push_back(read_link(l));
  const std::map<int, ddp::LinkFit> links = fit_links(tables);

  std::map<int, std::vector<Calibration>> cal;
  int cores = a.cores;
  for (const std::string& spec : a.calibrate)
    for (const SourcedProfile& s : read_profiles(spec)) {
      const int n = s.profile.facts.world_size;
      cal[n].push_back(calibrate(s.profile, link_for(links, n), s.source));
      if (cores == 0) cores = s.cores;
    }
  TANDEM_CHECK(cores >= 1, "--cores: the calibration files do not say the machine's cores; give --cores");

  std::vector<PredictionRow> rows;
  std::vector<double> loads;
  std::vector<std::string> skipped;  // measured cases that are their world size's only calibration
  if (!a.measured.empty()) {
    for (const std::string& spec : a.measured)
      for (const SourcedProfile& s : read_profiles(spec)) {
        const int n = s.profile.facts.world_size;
        const std::optional<Calibration> c = calibration_for(cal, n, cores, s.source);
        if (!c) {
          skipped.push_back(s.source);
          continue;
        }
        rows.push_back(predict_measured(*c, link_for(links, n), s.profile, a.first_cap_mb));
        loads.push_back(s.load_average);
      }
  } else {
    for (int n : parse_rank_counts(a.worlds, "--world"))
      for (const std::string& c : split_list(a.caps))
        rows.push_back(
            predict_row(*calibration_for(cal, n, cores), link_for(links, n), parse_cap_case(c, a.first_cap_mb)));
  }
  std::map<int, Calibration> shown;  // every calibration given, averaged per world size
  for (const auto& [n, cs] : cal) shown[n] = average(cs);

  fmt::print("{}\n{}\npredictions{}:\n\n{}", links_markdown(links), calibrations_markdown(shown),
             a.measured.empty() ? "" : " against the measurements", rows_markdown(rows));
  double worst = 0;
  for (const PredictionRow& r : rows)
    if (r.measured_step_ms) worst = std::max(worst, std::abs(r.error_pct()));
  if (!a.measured.empty()) {
    const double max_load = loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
    fmt::print(
        "\nlargest |error|: {:.1f} % over {} cases; 1-minute load average when the measurements started: up to "
        "{:.2f} on {} cores\n",
        worst, rows.size(), max_load, cores);
    if (!skipped.empty())
      fmt::print("not validated (each is its world size's only calibration): {}\n", fmt::join(skipped, ", "));
  }

  if (!a.json_out.empty()) {
    json j;
    j["command"] = command_line();
    j["cores"] = cores;
    for (const auto& [n, f] : links)
      j["links"].push_back({{"world_size", n},
                            {"alpha_us", f.alpha_us},
                            {"beta_us_per_byte", f.beta_us_per_byte},
                            {"max_abs_rel_residual", f.max_abs_rel_residual},
                            {"rms_rel_residual", f.rms_rel_residual},
                            {"rows", f.samples}});
    for (const auto& [n, c] : shown)
      j["calibrations"].push_back({{"world_size", n},
                                   {"source", c.source},
                                   {"forward_ms", c.compute.forward_ms},
                                   {"backward_compute_ms", c.compute.backward_compute_ms},
                                   {"optimizer_ms", c.compute.optimizer_ms},
                                   {"data_wait_ms", c.compute.data_wait_ms},
                                   {"other_ms", c.compute.other_ms},
                                   {"scale_during_backward", c.overheads.scale_during_backward},
                                   {"scale_after_backward", c.overheads.scale_after_backward},
                                   {"stolen_share", c.overheads.stolen_share},
                                   {"launch_ms", c.overheads.launch_ms},
                                   {"ready_lag", c.overheads.ready_lag},
                                   {"tail_ms", c.overheads.tail_ms}});
    for (const PredictionRow& r : rows) {
      json b = json::array();
      for (const ddp::SimulatedBucket& x : r.prediction.backward.buckets)
        b.push_back({{"bytes", x.bytes}, {"ready_ms", x.ready_ms}, {"start_ms", x.start_ms}, {"end_ms", x.end_ms}});
      json row = {{"world_size", r.world_size},
                  {"cap", r.cap},
                  {"calibration", r.calibration},
                  {"predicted_step_ms", r.prediction.step_ms},
                  {"predicted_exposed_ms", r.prediction.backward.exposed_comm_ms},
                  {"ideal_step_ms", r.ideal_step_ms},
                  {"buckets", b}};
      if (r.measured_step_ms) {
        row["measured_step_ms"] = *r.measured_step_ms;
        row["measured_exposed_ms"] = *r.measured_exposed_ms;
        row["error_pct"] = r.error_pct();
      }
      j["rows"].push_back(row);
    }
    report::write_json(a.json_out, j);
  }
}

}  // namespace

void add_bench_predict_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("predict", "Predict DDP step time per bucket cap and world size (the step model)");
  auto a = std::make_shared<Args>();
  cmd->add_option("--calibrate", a->calibrate, "Measured profile(s): bench folder or file, optionally :LABEL")
      ->required();
  cmd->add_option("--link", a->links, "bench allreduce table per world size: FILE or N=FILE");
  cmd->add_option("--caps", a->caps, "Bucket caps in MB to predict, comma-separated; 'one' = a single bucket");
  cmd->add_option("--world", a->worlds, "World sizes to predict, comma-separated");
  cmd->add_option("--first-cap-mb", a->first_cap_mb, "DDP's first_bucket_cap_mb")->capture_default_str();
  cmd->add_option("--cores", a->cores, "Cores the ranks share (default: the calibration file's machine)");
  cmd->add_option("--measured", a->measured, "Bench folder(s)/file(s) to validate against (every case in them)");
  cmd->add_option("--json", a->json_out, "Also write the fits, calibrations and rows as JSON");
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
