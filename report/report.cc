#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "report/svg_chart.h"
#include "report/tables.h"

namespace tandem::report {

namespace fs = std::filesystem;

namespace {

std::string f1(double v) { return fmt::format("{:.1f}", v); }
std::string f2(double v) { return fmt::format("{:.2f}", v); }
std::string mib(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }
std::string pct(double f) { return std::isfinite(f) ? fmt::format("{:.0f}%", 100 * f) : "-"; }
std::string ratio(double r) { return std::isfinite(r) ? fmt::format("{:.2f}", r) : "-"; }

std::string cap_label(const Profile& p) {
  return p.facts.one_bucket ? std::string("one bucket") : fmt::format("{:g}", p.facts.bucket_cap_mb);
}

double overlap_fraction(const Profile& p) {
  return p.median.comm_ms > 0 ? p.median.overlap_ms / p.median.comm_ms : std::nan("");
}

// The part of the step not in the named phases (logging, Python-free glue, loader hand-off).
double other_ms(const Profile& p) {
  const StepSample& m = p.median;
  return std::max(0.0, m.step_ms - m.data_wait_ms - m.forward_ms - m.backward_ms - m.optimizer_ms);
}

void write_text(const fs::path& path, const std::string& text, std::vector<fs::path>& written) {
  write_file_atomically(path, text);
  written.push_back(path);
}

// A fixed-width text table.
std::string text_table(const Table& t) {
  std::vector<size_t> width(t.header.size(), 0);
  for (size_t c = 0; c < t.header.size(); ++c) width[c] = t.header[c].size();
  for (const auto& row : t.rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& fields) {
    std::string s = " ";
    for (size_t c = 0; c < fields.size(); ++c)
      s += c == 0 ? fmt::format(" {:<{}}", fields[c], width[c]) : fmt::format("  {:>{}}", fields[c], width[c]);
    return s + "\n";
  };
  std::string out = line(t.header);
  size_t total = 1;
  for (size_t w : width) total += w + 2;
  out += "  " + std::string(total - 1, '-') + "\n";
  for (const auto& row : t.rows) out += line(row);
  return out;
}

Table scaling_rows(const ScalingBench& s) {
  Table t{{"ranks", "samples/s", "speedup", "efficiency", "step ms", "step p10-p90", "compute ms", "comm ms",
           "exposed ms", "data ms", "epoch s (est.)"},
          {},
          "rrrrrrrrrrr"};
  std::vector<ScalingRow> rows = scaling_table(s.cases);
  for (const ScalingRow& r : rows) {
    const Profile& p = *std::find_if(s.cases.begin(), s.cases.end(),
                                     [&](const Profile& c) { return c.facts.world_size == r.world_size; });
    t.rows.push_back({std::to_string(r.world_size), f1(r.samples_per_second), f2(r.speedup), pct(r.efficiency),
                      f1(p.median.step_ms), fmt::format("{:.1f}-{:.1f}", p.step_ms.p10, p.step_ms.p90),
                      f1(p.compute_ms()), f1(p.median.comm_ms), f1(p.median.exposed_comm_ms), f1(p.median.data_wait_ms),
                      f1(r.epoch_seconds)});
  }
  return t;
}

std::string bucket_sizes_mb(const std::vector<int64_t>& bytes) {
  std::vector<std::string> parts;
  for (int64_t b : bytes) parts.push_back(fmt::format("{:.2f}", static_cast<double>(b) / (1 << 20)));
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, "+"));
}

Table bucket_rows(const BucketsBench& b) {
  Table t{{"bucket_cap_mb", "buckets", "bucket MiB", "step ms", "step p10-p90", "samples/s", "comm ms", "exposed ms",
           "overlap", "compute/comm"},
          {},
          "lrlrrrrrrr"};
  for (const Profile& p : b.cases)
    t.rows.push_back({cap_label(p), std::to_string(p.facts.bucket_bytes.size()), bucket_sizes_mb(p.facts.bucket_bytes),
                      f1(p.median.step_ms), fmt::format("{:.1f}-{:.1f}", p.step_ms.p10, p.step_ms.p90),
                      f1(p.samples_per_second), f1(p.median.comm_ms), f1(p.median.exposed_comm_ms),
                      pct(overlap_fraction(p)), ratio(compute_comm_ratio(p))});
  return t;
}

Table step_rows(const StepBench& s) {
  Table t{{"precision", "ranks", "batch", "samples/s", "step ms", "step p10-p90", "forward ms", "backward ms",
           "optimizer ms", "peak MiB"},
          {},
          "lrrrrrrrrr"};
  for (const Profile& p : s.cases)
    t.rows.push_back({p.facts.precision, std::to_string(p.facts.world_size), std::to_string(p.facts.per_device_batch),
                      f1(p.samples_per_second), f1(p.median.step_ms),
                      fmt::format("{:.1f}-{:.1f}", p.step_ms.p10, p.step_ms.p90), f1(p.median.forward_ms),
                      f1(p.median.backward_ms), f1(p.median.optimizer_ms), mib(p.peak_memory_bytes)});
  return t;
}

Table run_rows(const std::vector<TrainingRun>& runs) {
  Table t{{"run", "ranks", "final accuracy", "best accuracy", "epochs", "mean epoch s (2..)", "train s", "samples/s",
           "dir"},
          {},
          "lrrrrrrrl"};
  for (const TrainingRun& r : runs) {
    double best = 0;
    for (const EvalPoint& e : r.evals) best = std::max(best, e.accuracy);
    const auto epochs = r.epoch_seconds();
    double mean = 0;
    for (const auto& [e, s] : epochs) mean += s / static_cast<double>(epochs.size());
    t.rows.push_back({r.label, std::to_string(r.world_size), fmt::format("{:.4f}", r.final_accuracy),
                      fmt::format("{:.4f}", best), std::to_string(r.evals.size()), epochs.empty() ? "-" : f1(mean),
                      f1(r.train_seconds), f1(r.samples_per_second), r.dir.string()});
  }
  return t;
}

// Every case of every bench, one row each, all numbers.
Table all_cases(const BenchFolder& b) {
  Table t{{"bench",
           "case",
           "world_size",
           "device",
           "backend",
           "per_device_batch",
           "gradient_accumulation_steps",
           "precision",
           "comm_hook",
           "bucket_cap_mb",
           "buckets",
           "step_ms_median",
           "step_ms_p10",
           "step_ms_p90",
           "samples_per_second",
           "speedup",
           "efficiency",
           "data_wait_ms",
           "forward_ms",
           "backward_ms",
           "backward_compute_ms",
           "comm_ms",
           "exposed_comm_ms",
           "overlap_ms",
           "optimizer_ms",
           "compute_comm_ratio",
           "peak_memory_mib",
           "epoch_seconds_est",
           "timed_steps"},
          {},
          ""};
  auto add = [&](const char* bench, const Profile& p, double speedup, double efficiency) {
    const StepSample& m = p.median;
    t.rows.push_back({bench,
                      p.facts.label,
                      std::to_string(p.facts.world_size),
                      p.facts.device,
                      p.facts.backend,
                      std::to_string(p.facts.per_device_batch),
                      std::to_string(p.facts.gradient_accumulation_steps),
                      p.facts.precision,
                      p.facts.comm_hook,
                      p.facts.one_bucket ? "inf" : fmt::format("{:g}", p.facts.bucket_cap_mb),
                      std::to_string(p.facts.bucket_bytes.size()),
                      fmt::format("{:.3f}", m.step_ms),
                      fmt::format("{:.3f}", p.step_ms.p10),
                      fmt::format("{:.3f}", p.step_ms.p90),
                      fmt::format("{:.2f}", p.samples_per_second),
                      std::isnan(speedup) ? "" : fmt::format("{:.4f}", speedup),
                      std::isnan(efficiency) ? "" : fmt::format("{:.4f}", efficiency),
                      fmt::format("{:.3f}", m.data_wait_ms),
                      fmt::format("{:.3f}", m.forward_ms),
                      fmt::format("{:.3f}", m.backward_ms),
                      fmt::format("{:.3f}", m.backward_compute_ms),
                      fmt::format("{:.3f}", m.comm_ms),
                      fmt::format("{:.3f}", m.exposed_comm_ms),
                      fmt::format("{:.3f}", m.overlap_ms),
                      fmt::format("{:.3f}", m.optimizer_ms),
                      std::isfinite(compute_comm_ratio(p)) ? fmt::format("{:.3f}", compute_comm_ratio(p)) : "",
                      mib(p.peak_memory_bytes),
                      fmt::format("{:.2f}", p.epoch_seconds()),
                      std::to_string(p.step_ms.n)});
  };
  const double none = std::nan("");
  if (b.scaling) {
    std::vector<ScalingRow> rows = scaling_table(b.scaling->cases);
    for (const Profile& p : b.scaling->cases) {
      auto r = std::find_if(rows.begin(), rows.end(),
                            [&](const ScalingRow& x) { return x.world_size == p.facts.world_size; });
      add("scaling", p, r->speedup, r->efficiency);
    }
  }
  if (b.buckets)
    for (const Profile& p : b.buckets->cases) add("buckets", p, none, none);
  if (b.step)
    for (const Profile& p : b.step->cases) add("step", p, none, none);
  return t;
}

// Stacked phases of a step, one bar per profile.
BarChart breakdown_chart(const std::string& title, const std::string& x_label, const std::vector<Profile>& cases,
                         const std::vector<std::string>& categories) {
  BarChart c;
  c.title = title;
  c.x_label = x_label;
  c.y_label = "milliseconds per step (median)";
  c.categories = categories;
  c.stacked = true;
  c.value_format = "{:.1f}";
  Series data{"DataLoader wait", {}, {}}, fwd{"forward", {}, {}}, bwd{"backward (autograd)", {}, {}},
      exposed{"exposed all-reduce", {}, {}}, opt{"optimizer", {}, {}}, other{"other", {}, {}};
  for (const Profile& p : cases) {
    const StepSample& m = p.median;
    data.y.push_back(m.data_wait_ms);
    fwd.y.push_back(m.forward_ms);
    // backward_ms holds the autograd pass and the wait for the last all-reduce.
    const double exposed_part = std::min(m.exposed_comm_ms, m.backward_ms);
    bwd.y.push_back(std::max(0.0, m.backward_ms - exposed_part));
    exposed.y.push_back(exposed_part);
    opt.y.push_back(m.optimizer_ms);
    other.y.push_back(other_ms(p));
  }
  c.bars = {data, fwd, bwd, exposed, opt, other};
  return c;
}

}  // namespace

BucketSweepFacts bucket_sweep_facts(const BucketsBench& b) {
  TANDEM_CHECK(!b.cases.empty(), "bucket sweep has no cases");
  BucketSweepFacts f;
  f.current_cap_mb = b.current_cap_mb;
  const Profile* best = &b.cases.front();
  for (const Profile& p : b.cases)
    if (p.median.step_ms < best->median.step_ms) best = &p;
  f.best_label = cap_label(*best);
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
  std::string txt = "Tandem performance report\n=========================\n\n";
  txt += fmt::format("Generated {} by: {}\n\n", in.date, in.command);

  auto provenance = [&](const char* file, const BenchMeta& m) {
    txt += fmt::format("  {}: {} on {} ({} cores, {:.0f} GiB{}; load average {:.1f} at the start)\n    command: {}\n",
                       file, m.date, m.machine.cpu, m.machine.cores, m.machine.memory_gib,
                       m.machine.gpu.empty() ? "" : ", " + m.machine.gpu, m.machine.load_average, m.command);
  };
  txt += "Inputs:\n";
  if (b.scaling) provenance("scaling.json", b.scaling->meta);
  if (b.buckets) provenance("buckets.json", b.buckets->meta);
  if (b.step) provenance("step.json", b.step->meta);
  if (b.batch_search) provenance("find_batch_size.json", b.batch_search->meta);
  for (const TrainingRun& r : in.runs) txt += fmt::format("  training run '{}': {}\n", r.label, r.dir.string());
  txt += "\n";

  // --- tables ------------------------------------------------------------------------------
  Table all = all_cases(b);
  if (!all.rows.empty()) write_text(out_dir / "summary.csv", to_csv(all), written);
  std::string tex;
  if (b.scaling) {
    const Profile& p0 = b.scaling->cases.front();
    Table t = scaling_rows(*b.scaling);
    txt += fmt::format(
        "Scaling ({} scaling: {} sequences per device per step, {} accumulation step(s), {}, {} backend, "
        "{} timed steps per world size after {} warm-up, {} round(s)):\n",
        b.scaling->mode, p0.facts.per_device_batch, p0.facts.gradient_accumulation_steps, p0.facts.precision,
        b.scaling->cases.back().facts.backend, p0.step_ms.n / std::max(1, b.scaling->rounds), p0.warmup_steps,
        b.scaling->rounds);
    txt += text_table(t) + "\n";
    if (b.scaling->rounds > 1) {
      // Drift on a shared machine shows as rounds that disagree.
      txt += "  median step ms of each round (in the order run):";
      for (const Profile& p : b.scaling->cases) {
        const size_t per = p.step_samples_ms.size() / static_cast<size_t>(b.scaling->rounds);
        std::vector<std::string> medians;
        for (size_t r = 0; per > 0 && r < static_cast<size_t>(b.scaling->rounds); ++r)
          medians.push_back(f1(summarize({p.step_samples_ms.begin() + static_cast<std::ptrdiff_t>(r * per),
                                          p.step_samples_ms.begin() + static_cast<std::ptrdiff_t>((r + 1) * per)})
                                   .median));
        txt += fmt::format(" {} rank(s): {};", p.facts.world_size, fmt::join(medians, ", "));
      }
      txt.back() = '\n';
    }
    txt +=
        "  speedup = samples/s at N ranks / samples/s at 1 rank (T1/TN per sample); efficiency = speedup / N.\n"
        "  compute = forward + backward autograd pass; comm = all-reduce time; exposed = all-reduce time after "
        "backward ended.\n\n";
    Table lt{{"Ranks", "Samples/s", "Speedup", "Efficiency", "Step (ms)", "Exposed comm (ms)", "Epoch (s, est.)"},
             {},
             "rrrrrrr"};
    for (const auto& row : t.rows) lt.rows.push_back({row[0], row[1], row[2], row[3], row[4], row[8], row[10]});
    tex += to_latex(lt,
                    fmt::format("DDP scaling, {} ranks on one host ({})", b.scaling->cases.back().facts.world_size,
                                p0.facts.device),
                    "tab:tandem-scaling");
  }
  if (b.buckets) {
    const Profile& p0 = b.buckets->cases.front();
    Table t = bucket_rows(*b.buckets);
    const BucketSweepFacts f = bucket_sweep_facts(*b.buckets);
    txt += fmt::format(
        "Bucket sweep ({} ranks, {} backend, gradients {:.2f} MB in {} parameters; the config uses "
        "ddp_bucket_cap_mb = {:g}):\n",
        p0.facts.world_size, p0.facts.backend, p0.facts.gradient_mb(), p0.facts.num_parameters,
        b.buckets->current_cap_mb);
    txt += text_table(t);
    txt += fmt::format("  fastest: {} ({:.1f} ms per step; its p10-p90 half-spread is {:.1f} ms){}\n", f.best_label,
                       f.best_step_ms, f.noise_ms,
                       f.current_step_ms > 0
                           ? fmt::format("; the config's {:g} MB: {:.1f} ms", f.current_cap_mb, f.current_step_ms)
                           : "");
    // Sizes that produce the same buckets measure the same thing twice.
    size_t distinct = 0;
    for (size_t i = 0; i < b.buckets->cases.size(); ++i) {
      bool seen = false;
      for (size_t k = 0; k < i; ++k)
        seen |= b.buckets->cases[k].facts.bucket_bytes == b.buckets->cases[i].facts.bucket_bytes;
      distinct += seen ? 0 : 1;
    }
    if (distinct < b.buckets->cases.size())
      txt += fmt::format(
          "  {} sizes give only {} distinct bucket layouts (the first bucket is 1 MiB, a parameter "
          "larger than the cap fills a bucket alone, and a cap above the {:.2f} MB of gradients changes "
          "nothing): sizes with the same layout differ only by noise.\n",
          b.buckets->cases.size(), distinct, p0.facts.gradient_mb());
    if (f.current_step_ms > 0)
      txt += f.current_step_ms - f.best_step_ms > f.noise_ms
                 ? fmt::format("  {} beats the config's size by more than the noise.\n\n", f.best_label)
                 : "  the difference is within the noise: no bucket size is measurably better here.\n\n";
    else
      txt += "\n";
    if (!tex.empty()) tex += "\n";
    Table lt{{"Bucket cap (MB)", "Buckets", "Step (ms)", "Exposed comm (ms)", "Overlap", "Compute/comm"}, {}, "lrrrrr"};
    for (const auto& row : t.rows) lt.rows.push_back({row[0], row[1], row[3], row[7], row[8], row[9]});
    tex += to_latex(lt, fmt::format("DDP bucket size sweep, {} ranks", p0.facts.world_size), "tab:tandem-buckets");
  }
  if (b.step) {
    txt += "Train step by precision:\n" + text_table(step_rows(*b.step)) + "\n";
    if (!tex.empty()) tex += "\n";
    Table st = step_rows(*b.step);
    Table lt{{"Precision", "Samples/s", "Step (ms)", "Peak memory (MiB)"}, {}, "lrrr"};
    for (const auto& row : st.rows) lt.rows.push_back({row[0], row[3], row[4], row[9]});
    tex += to_latex(lt, "Training step throughput and peak memory by precision", "tab:tandem-step");
  }
  if (b.batch_search) {
    const BatchSearch& s = *b.batch_search;
    txt += fmt::format("Largest per-device batch ({}, {}{}): {}{}\n", s.device, s.config,
                       s.memory_limit_bytes > 0 ? fmt::format(", limit {} MiB", mib(s.memory_limit_bytes)) : "",
                       s.max_batch, s.hit_upper_bound ? " (the search's upper bound; more may fit)" : "");
    for (const BatchTrial& t : s.trials)
      txt += fmt::format("  batch {:>6}: {}{}\n", t.batch, t.fits ? "fits" : "does not fit",
                         t.fits ? fmt::format(", peak {} MiB", mib(t.peak_bytes)) : " (" + t.error + ")");
    txt += "\n";
  }
  if (!in.runs.empty()) {
    Table t = run_rows(in.runs);
    write_text(out_dir / "training.csv", to_csv(t), written);
    txt +=
        "Training runs (epoch time = time between consecutive epoch-end evaluations, one evaluation included; "
        "epoch 1 also holds start-up and is left out):\n" +
        text_table(t) + "\n";
  }
  if (!tex.empty()) write_text(out_dir / "summary.tex", tex, written);

  // --- plots -------------------------------------------------------------------------------
  if (b.scaling) {
    const std::vector<ScalingRow> rows = scaling_table(b.scaling->cases);
    std::vector<std::string> cats;
    std::vector<Profile> sorted = b.scaling->cases;
    std::sort(sorted.begin(), sorted.end(),
              [](const Profile& x, const Profile& y) { return x.facts.world_size < y.facts.world_size; });
    Series speedup{"measured", {}, {}}, ideal{"ideal (N)", {}, {}, true}, eff{"efficiency", {}, {}},
        sps{"samples/s", {}, {}};
    for (const ScalingRow& r : rows) {
      cats.push_back(fmt::format("{} rank{}", r.world_size, r.world_size > 1 ? "s" : ""));
      speedup.y.push_back(r.speedup);
      ideal.y.push_back(r.world_size);
      eff.y.push_back(100 * r.efficiency);
      sps.y.push_back(r.samples_per_second);
    }
    BarChart sc{"Speedup",     "world size", "speedup (samples/s vs 1 rank)", cats, {speedup}, false, {ideal},
                {{1.0, "1x"}}, "{:.2f}"};
    BarChart ec{"Efficiency", "world size", "efficiency (%)", cats, {eff}, false, {}, {{100, "ideal"}, {80, "80%"}},
                "{:.0f}"};
    write_text(out_dir / "speedup_efficiency.svg", render_svg({sc, ec}), written);
    std::vector<Chart> tp{
        BarChart{"Throughput", "world size", "samples per second (all ranks)", cats, {sps}, false, {}, {}, "{:.0f}"}};
    if (b.step && !b.step->cases.empty()) {
      std::vector<std::string> pc;
      Series ps{"samples/s", {}, {}};
      for (const Profile& p : b.step->cases) {
        pc.push_back(fmt::format("{} ({}r)", p.facts.precision, p.facts.world_size));
        ps.y.push_back(p.samples_per_second);
      }
      tp.push_back(
          BarChart{"Throughput by precision", "precision", "samples per second", pc, {ps}, false, {}, {}, "{:.0f}"});
    }
    write_text(out_dir / "throughput.svg", render_svg(tp), written);
    write_text(out_dir / "step_breakdown.svg",
               render_svg({breakdown_chart("Where a step's time goes", "world size", sorted, cats)}, 720, 440),
               written);
    if (in.runs.empty()) {
      Series est{"estimated epoch time", {}, {}};
      for (const ScalingRow& r : rows) est.y.push_back(r.epoch_seconds);
      write_text(out_dir / "epoch_time.svg",
                 render_svg({BarChart{"Epoch time (estimated: epoch examples / throughput)",
                                      "world size",
                                      "seconds",
                                      cats,
                                      {est},
                                      false,
                                      {},
                                      {},
                                      "{:.1f}"}}),
                 written);
    }
  } else if (b.step && !b.step->cases.empty()) {
    std::vector<std::string> pc;
    Series ps{"samples/s", {}, {}};
    for (const Profile& p : b.step->cases) {
      pc.push_back(p.facts.precision);
      ps.y.push_back(p.samples_per_second);
    }
    write_text(out_dir / "throughput.svg",
               render_svg({BarChart{
                   "Throughput by precision", "precision", "samples per second", pc, {ps}, false, {}, {}, "{:.0f}"}}),
               written);
  }
  if (b.step && !b.step->cases.empty()) {
    std::vector<std::string> pc;
    Series mem{"peak MiB", {}, {}};
    for (const Profile& p : b.step->cases) {
      pc.push_back(p.facts.precision);
      mem.y.push_back(static_cast<double>(p.peak_memory_bytes) / (1 << 20));
    }
    write_text(
        out_dir / "memory.svg",
        render_svg({BarChart{"Peak tensor memory per rank", "precision", "MiB", pc, {mem}, false, {}, {}, "{:.1f}"}}),
        written);
  }
  if (b.buckets) {
    std::vector<std::string> cats;
    Series overlap{"overlap %", {}, {}}, exposed{"exposed all-reduce", {}, {}}, step{"step", {}, {}};
    std::vector<double> xs;
    for (const Profile& p : b.buckets->cases) {
      cats.push_back(fmt::format("{} ({})",
                                 p.facts.one_bucket ? std::string("one") : fmt::format("{:g}", p.facts.bucket_cap_mb),
                                 p.facts.bucket_bytes.size()));
      overlap.y.push_back(100 * overlap_fraction(p));
    }
    BarChart oc{"All-reduce overlapped with backward",
                "bucket_cap_mb (buckets)",
                "overlap (% of all-reduce time)",
                cats,
                {overlap},
                false,
                {},
                {},
                "{:.0f}"};
    write_text(
        out_dir / "buckets.svg",
        render_svg({breakdown_chart("Step time by bucket size", "bucket_cap_mb (buckets)", b.buckets->cases, cats), oc},
                   640, 440),
        written);
  }
  if (!in.runs.empty()) {
    LineChart acc{"Evaluation accuracy", "epoch", "accuracy", {}, false, {}, false, {}};
    LineChart et{"Epoch time", "epoch", "seconds (one evaluation included)", {}, false, {}, true, {}};
    for (const TrainingRun& r : in.runs) {
      Series a{r.label, {}, {}}, e{r.label, {}, {}};
      for (const EvalPoint& p : r.evals) {
        a.x.push_back(p.epoch);
        a.y.push_back(p.accuracy);
      }
      for (const auto& [epoch, s] : r.epoch_seconds()) {
        e.x.push_back(epoch);
        e.y.push_back(s);
      }
      acc.series.push_back(a);
      et.series.push_back(e);
    }
    write_text(out_dir / "accuracy.svg", render_svg({acc}), written);
    write_text(out_dir / "epoch_time.svg", render_svg({et}), written);
  }

  // --- diagnosis -----------------------------------------------------------------------------
  if (b.scaling || b.buckets || b.step) {
    const DiagnosisInput d = diagnosis_input(b);
    const Profile& p = d.profile;
    txt += fmt::format(
        "Diagnosis of the {}-rank profile ({}, {} backend, batch {} x {} accumulation, {}, "
        "{:.2f} M parameters = {:.2f} MB of gradients):\n",
        p.facts.world_size, p.facts.device, p.facts.backend, p.facts.per_device_batch,
        p.facts.gradient_accumulation_steps, p.facts.precision, static_cast<double>(p.facts.num_parameters) / 1e6,
        p.facts.gradient_mb());
    txt += fmt::format(
        "  step {:.1f} ms = data {:.1f} + forward {:.1f} + backward {:.1f} (autograd {:.1f}, exposed "
        "all-reduce {:.1f}) + optimizer {:.1f} + other {:.1f}\n",
        p.median.step_ms, p.median.data_wait_ms, p.median.forward_ms, p.median.backward_ms,
        p.median.backward_compute_ms, p.median.exposed_comm_ms, p.median.optimizer_ms, other_ms(p));
    txt += fmt::format(
        "  compute/comm ratio {}, exposed all-reduce {} of the step, all-reduce overlapped {}, "
        "DataLoader wait {} of the step\n\n",
        ratio(compute_comm_ratio(p)), pct(exposed_comm_fraction(p)), pct(overlap_fraction(p)),
        pct(data_wait_fraction(p)));
    txt += format_advice(diagnose(d)) + "\n";
    txt +=
        "Thresholds (report/diagnosis.h): comm-bound when exposed all-reduce > 20% of the step or compute/comm < 1; "
        "data-bound when DataLoader wait > 10%; sync points when logging or checkpointing costs > 5%; small batch "
        "below 32 per device; poor scaling below 70% efficiency, negative below 1x.\n";
  }
  write_text(out_dir / "report.txt", txt, written);
  if (text_out) *text_out = txt;
  return written;
}

}  // namespace tandem::report
