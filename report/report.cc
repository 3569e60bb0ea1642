// `tandem report`: assembles report.txt from one section per bench result,
// writes the tables (summary.csv, summary.tex, training.csv) and the plots
// (report_plots.h), and picks what the diagnosis looks at.
#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/atomic_file.h"
#include "core/check.h"
#include "report/number_format.h"
#include "report/report_plots.h"
#include "report/report_tables.h"

namespace tandem::report {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text, std::vector<fs::path>& written) {
  write_file_atomically(path, text);
  written.push_back(path);
}

// --- report.txt, one function per section ---------------------------------------------------

std::string provenance(const char* file, const BenchMeta& m) {
  return fmt::format("  {}: {} on {} ({} cores, {:.0f} GiB{}; load average {:.1f} at the start)\n    command: {}\n",
                     file, m.date, m.machine.cpu, m.machine.cores, m.machine.memory_gib,
                     m.machine.gpu.empty() ? "" : ", " + m.machine.gpu, m.machine.load_average, m.command);
}

// The title, how the report was made, and where each input came from.
std::string header_section(const ReportInputs& in) {
  const BenchFolder& b = in.bench;
  std::string txt = "Tandem performance report\n=========================\n\n";
  txt += fmt::format("Generated {} by: {}\n\n", in.date, in.command);
  txt += "Inputs:\n";
  if (b.scaling) txt += provenance("scaling.json", b.scaling->meta);
  if (b.buckets) txt += provenance("buckets.json", b.buckets->meta);
  if (b.step) txt += provenance("step.json", b.step->meta);
  if (b.batch_search) txt += provenance("find_batch_size.json", b.batch_search->meta);
  for (const TrainingRun& r : in.runs) txt += fmt::format("  training run '{}': {}\n", r.label, r.dir.string());
  return txt + "\n";
}

// Each world size's median step time in each round, on one line: drift on a
// shared machine shows as rounds that disagree.
std::string round_medians(const ScalingBench& s) {
  const size_t rounds = static_cast<size_t>(s.rounds);
  std::string txt = "  median step ms of each round (in the order run):";
  for (const Profile& p : s.cases) {
    const size_t per = p.step_samples_ms.size() / rounds;
    std::vector<std::string> medians;
    for (size_t r = 0; per > 0 && r < rounds; ++r)
      medians.push_back(f1(summarize({p.step_samples_ms.begin() + static_cast<std::ptrdiff_t>(r * per),
                                      p.step_samples_ms.begin() + static_cast<std::ptrdiff_t>((r + 1) * per)})
                               .median));
    txt += fmt::format(" {} rank(s): {};", p.facts.world_size, fmt::join(medians, ", "));
  }
  txt.back() = '\n';
  return txt;
}

std::string scaling_section(const ScalingBench& s) {
  const Profile& p0 = s.cases.front();
  std::string txt = fmt::format(
      "Scaling ({} scaling: {} sequences per device per step, {} accumulation step(s), {}, {} backend, "
      "{} timed steps per world size after {} warm-up, {} round(s)):\n",
      s.mode, p0.facts.per_device_batch, p0.facts.gradient_accumulation_steps, p0.facts.precision,
      s.cases.back().facts.backend, p0.step_ms.n / std::max(1, s.rounds), p0.warmup_steps, s.rounds);
  txt += to_text(scaling_text_table(scaling_table_rows(s))) + "\n";
  if (s.rounds > 1) txt += round_medians(s);
  txt +=
      "  speedup = samples/s at N ranks / samples/s at 1 rank (T1/TN per sample); efficiency = speedup / N.\n"
      "  compute = forward + backward autograd pass; comm = all-reduce time; exposed = all-reduce time after "
      "backward ended.\n\n";
  return txt;
}

// How many of the sweep's cases have a bucket layout no earlier case had.
size_t distinct_layouts(const BucketsBench& b) {
  size_t distinct = 0;
  for (size_t i = 0; i < b.cases.size(); ++i) {
    bool seen = false;
    for (size_t k = 0; k < i; ++k) seen |= b.cases[k].facts.bucket_bytes == b.cases[i].facts.bucket_bytes;
    distinct += seen ? 0 : 1;
  }
  return distinct;
}

std::string bucket_section(const BucketsBench& b) {
  const Profile& p0 = b.cases.front();
  const BucketSweepFacts f = bucket_sweep_facts(b);
  std::string txt = fmt::format(
      "Bucket sweep ({} ranks, {} backend, gradients {:.2f} MB in {} parameters; the config uses "
      "ddp_bucket_cap_mb = {:g}):\n",
      p0.facts.world_size, p0.facts.backend, p0.facts.gradient_mb(), p0.facts.num_parameters, b.current_cap_mb);
  txt += to_text(bucket_text_table(bucket_table_rows(b)));
  txt += fmt::format("  fastest: {} ({:.1f} ms per step; its p10-p90 half-spread is {:.1f} ms){}\n", f.best_label,
                     f.best_step_ms, f.noise_ms,
                     f.current_step_ms > 0
                         ? fmt::format("; the config's {:g} MB: {:.1f} ms", f.current_cap_mb, f.current_step_ms)
                         : "");
  // Sizes that produce the same buckets measure the same thing twice.
  const size_t distinct = distinct_layouts(b);
  if (distinct < b.cases.size())
    txt += fmt::format(
        "  {} sizes give only {} distinct bucket layouts (the first bucket is 1 MiB, a parameter "
        "larger than the cap fills a bucket alone, and a cap above the {:.2f} MB of gradients changes "
        "nothing): sizes with the same layout differ only by noise.\n",
        b.cases.size(), distinct, p0.facts.gradient_mb());
  if (f.current_step_ms <= 0) return txt + "\n";
  return txt + (f.current_step_ms - f.best_step_ms > f.noise_ms
                    ? fmt::format("  {} beats the config's size by more than the noise.\n\n", f.best_label)
                    : "  the difference is within the noise: no bucket size is measurably better here.\n\n");
}

std::string step_section(const StepBench& s) {
  return "Train step by precision:\n" + to_text(step_text_table(step_table_rows(s))) + "\n";
}

std::string batch_search_section(const BatchSearch& s) {
  std::string txt =
      fmt::format("Largest per-device batch ({}, {}{}): {}{}\n", s.device, s.config,
                  s.memory_limit_bytes > 0 ? fmt::format(", limit {} MiB", mib(s.memory_limit_bytes)) : "", s.max_batch,
                  s.hit_upper_bound ? " (the search's upper bound; more may fit)" : "");
  for (const BatchTrial& t : s.trials)
    txt += fmt::format("  batch {:>6}: {}{}\n", t.batch, t.fits ? "fits" : "does not fit",
                       t.fits ? fmt::format(", peak {} MiB", mib(t.peak_bytes)) : " (" + t.error + ")");
  return txt + "\n";
}

std::string training_section(const Table& runs) {
  return "Training runs (epoch time = time between consecutive epoch-end evaluations, one evaluation included; "
         "epoch 1 also holds start-up and is left out):\n" +
         to_text(runs) + "\n";
}

// The profile the diagnosis looks at, where its step time goes, the findings,
// and the thresholds they were judged by.
std::string diagnosis_section(const BenchFolder& b, const Thresholds& t) {
  const DiagnosisInput d = diagnosis_input(b);
  const Profile& p = d.profile;
  std::string txt = fmt::format(
      "Diagnosis of the {}-rank profile ({}, {} backend, batch {} x {} accumulation, {}, "
      "{:.2f} M parameters = {:.2f} MB of gradients):\n",
      p.facts.world_size, p.facts.device, p.facts.backend, p.facts.per_device_batch,
      p.facts.gradient_accumulation_steps, p.facts.precision, static_cast<double>(p.facts.num_parameters) / 1e6,
      p.facts.gradient_mb());
  txt += fmt::format(
      "  step {:.1f} ms = data {:.1f} + forward {:.1f} + backward {:.1f} (autograd {:.1f}, exposed "
      "all-reduce {:.1f}) + optimizer {:.1f} + other {:.1f}\n",
      p.median.step_ms, p.median.data_wait_ms, p.median.forward_ms, p.median.backward_ms, p.median.backward_compute_ms,
      p.median.exposed_comm_ms, p.median.optimizer_ms, p.other_ms());
  txt += fmt::format(
      "  compute/comm ratio {}, exposed all-reduce {} of the step, all-reduce overlapped {}, "
      "DataLoader wait {} of the step\n\n",
      ratio(compute_comm_ratio(p)), pct(exposed_comm_fraction(p)), pct(overlap_fraction(p)),
      pct(data_wait_fraction(p)));
  txt += format_advice(diagnose(d, t)) + "\n";
  return txt + describe_thresholds(t);
}

// --- summary.tex ----------------------------------------------------------------------------

std::string latex_tables(const BenchFolder& b) {
  std::vector<std::string> tables;
  if (b.scaling)
    tables.push_back(
        to_latex(scaling_latex_table(scaling_table_rows(*b.scaling)),
                 fmt::format("DDP scaling, {} ranks on one host ({})", b.scaling->cases.back().facts.world_size,
                             b.scaling->cases.front().facts.device),
                 "tab:tandem-scaling"));
  if (b.buckets)
    tables.push_back(to_latex(bucket_latex_table(bucket_table_rows(*b.buckets)),
                              fmt::format("DDP bucket size sweep, {} ranks", b.buckets->cases.front().facts.world_size),
                              "tab:tandem-buckets"));
  if (b.step)
    tables.push_back(to_latex(step_latex_table(step_table_rows(*b.step)),
                              "Training step throughput and peak memory by precision", "tab:tandem-step"));
  return fmt::format("{}", fmt::join(tables, "\n"));
}

// --- plots ----------------------------------------------------------------------------------

std::vector<Plot> all_plots(const ReportInputs& in) {
  const BenchFolder& b = in.bench;
  std::vector<Plot> plots;
  auto add = [&](std::vector<Plot> more) { plots.insert(plots.end(), more.begin(), more.end()); };
  if (b.scaling) add(scaling_plots(*b.scaling, b.step ? &*b.step : nullptr, !in.runs.empty(), in.thresholds));
  if (b.step) add(step_plots(*b.step, b.scaling.has_value()));
  if (b.buckets) add(bucket_plots(*b.buckets));
  add(training_plots(in.runs));
  return plots;
}

}  // namespace

BucketSweepFacts bucket_sweep_facts(const BucketsBench& b) {
  TANDEM_CHECK(!b.cases.empty(), "bucket sweep has no cases");
  BucketSweepFacts f;
  f.current_cap_mb = b.current_cap_mb;
  const Profile* best = &b.cases.front();
  for (const Profile& p : b.cases)
    if (p.median.step_ms < best->median.step_ms) best = &p;
  f.best_label = bucket_cap_label(best->facts);
  f.best_cap_mb = best->facts.one_bucket ? std::ceil(best->facts.gradient_mb() + 1) : best->facts.bucket_cap_mb;
  f.best_step_ms = best->median.step_ms;
  f.noise_ms = (best->step_ms.p90 - best->step_ms.p10) / 2;
  for (const Profile& p : b.cases)
    if (!p.facts.one_bucket && p.facts.bucket_cap_mb == b.current_cap_mb) f.current_step_ms = p.median.step_ms;
  return f;
}

DiagnosisInput diagnosis_input(const BenchFolder& bench) {
  DiagnosisInput in;
  bool have = false;
  if (bench.scaling && !bench.scaling->cases.empty()) {
    const auto& cases = bench.scaling->cases;
    in.profile = *std::max_element(cases.begin(), cases.end(), [](const Profile& a, const Profile& b) {
      return a.facts.world_size < b.facts.world_size;
    });
    in.host_cores = bench.scaling->meta.machine.cores;
    in.load_average = bench.scaling->meta.machine.load_average;
    std::vector<ScalingRow> rows = scaling_table(cases);
    if (rows.size() > 1) in.scaling = ScalingFacts{rows.back().world_size, rows.back().speedup, rows.back().efficiency};
    for (const Profile& p : cases)
      if (p.facts.world_size == 1) in.baseline = p;
    have = true;
  }
  if (bench.buckets && !bench.buckets->cases.empty()) {
    in.buckets = bucket_sweep_facts(*bench.buckets);
    if (!have) {
      in.profile = bench.buckets->cases.front();
      for (const Profile& p : bench.buckets->cases)
        if (!p.facts.one_bucket && p.facts.bucket_cap_mb == bench.buckets->current_cap_mb) in.profile = p;
      in.host_cores = bench.buckets->meta.machine.cores;
      in.load_average = bench.buckets->meta.machine.load_average;
      have = true;
    }
  }
  if (!have && bench.step && !bench.step->cases.empty()) {
    in.profile = bench.step->cases.front();
    in.host_cores = bench.step->meta.machine.cores;
    in.load_average = bench.step->meta.machine.load_average;
    have = true;
  }
  TANDEM_CHECK(have, "no bench results to diagnose: run tandem bench scaling, buckets or step first");
  if (bench.batch_search) in.max_batch_that_fits = bench.batch_search->max_batch;
  return in;
}

std::vector<fs::path> write_report(const ReportInputs& in, const fs::path& out_dir, std::string* text_out) {
  fs::create_directories(out_dir);
  std::vector<fs::path> written;
  const BenchFolder& b = in.bench;

  const std::vector<CaseTableRow> cases = case_table_rows(b);
  if (!cases.empty()) write_text(out_dir / "summary.csv", to_csv(case_table(cases)), written);

  std::string txt = header_section(in);
  if (b.scaling) txt += scaling_section(*b.scaling);
  if (b.buckets) txt += bucket_section(*b.buckets);
  if (b.step) txt += step_section(*b.step);
  if (b.batch_search) txt += batch_search_section(*b.batch_search);
  if (!in.runs.empty()) {
    const Table runs = training_table(training_table_rows(in.runs));
    write_text(out_dir / "training.csv", to_csv(runs), written);
    txt += training_section(runs);
  }

  const std::string tex = latex_tables(b);
  if (!tex.empty()) write_text(out_dir / "summary.tex", tex, written);
  for (const Plot& p : all_plots(in)) write_text(out_dir / p.file, p.svg, written);

  if (b.scaling || b.buckets || b.step) txt += diagnosis_section(b, in.thresholds);
  write_text(out_dir / "report.txt", txt, written);
  if (text_out) *text_out = txt;
  return written;
}

}  // namespace tandem::report
