// The report's typed table rows and their text, CSV and LaTeX spellings.
#include "report/report_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/diagnosis.h"
#include "report/number_format.h"

namespace tandem::report {

namespace {

// "1.00+0.48": each bucket's size in MiB, in launch order.
std::string bucket_sizes_mb(const std::vector<int64_t>& bytes) {
  std::vector<std::string> parts;
  for (int64_t b : bytes) parts.push_back(fmt::format("{:.2f}", static_cast<double>(b) / (1 << 20)));
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, "+"));
}

std::string fixed3(double v) { return fmt::format("{:.3f}", v); }

}  // namespace

std::string bucket_cap_label(const RunFacts& f) {
  return f.one_bucket ? std::string("one bucket") : fmt::format("{:g}", f.bucket_cap_mb);
}

std::vector<ScalingTableRow> scaling_table_rows(const ScalingBench& s) {
  std::vector<ScalingTableRow> out;
  for (const ScalingRow& r : scaling_table(s.cases)) {
    const Profile& p = *std::find_if(s.cases.begin(), s.cases.end(),
                                     [&](const Profile& c) { return c.facts.world_size == r.world_size; });
    out.push_back({r.world_size, r.samples_per_second, r.speedup, r.efficiency, p.median.step_ms, p.step_ms.p10,
                   p.step_ms.p90, p.compute_ms(), p.median.comm_ms, p.median.exposed_comm_ms, p.median.data_wait_ms,
                   r.epoch_seconds});
  }
  return out;
}

Table scaling_text_table(const std::vector<ScalingTableRow>& rows) {
  Table t{{"ranks", "samples/s", "speedup", "efficiency", "step ms", "step p10-p90", "compute ms", "comm ms",
           "exposed ms", "data ms", "epoch s (est.)"},
          {},
          "rrrrrrrrrrr"};
  for (const ScalingTableRow& r : rows)
    t.rows.push_back({std::to_string(r.ranks), f1(r.samples_per_second), f2(r.speedup), pct(r.efficiency),
                      f1(r.step_ms), spread(r.step_p10_ms, r.step_p90_ms), f1(r.compute_ms), f1(r.comm_ms),
                      f1(r.exposed_comm_ms), f1(r.data_wait_ms), f1(r.epoch_seconds)});
  return t;
}

Table scaling_latex_table(const std::vector<ScalingTableRow>& rows) {
  Table t{{"Ranks", "Samples/s", "Speedup", "Efficiency", "Step (ms)", "Exposed comm (ms)", "Epoch (s, est.)"},
          {},
          "rrrrrrr"};
  for (const ScalingTableRow& r : rows)
    t.rows.push_back({std::to_string(r.ranks), f1(r.samples_per_second), f2(r.speedup), pct(r.efficiency),
                      f1(r.step_ms), f1(r.exposed_comm_ms), f1(r.epoch_seconds)});
  return t;
}

std::vector<BucketTableRow> bucket_table_rows(const BucketsBench& b) {
  std::vector<BucketTableRow> out;
  for (const Profile& p : b.cases)
    out.push_back({bucket_cap_label(p.facts), p.facts.bucket_bytes, p.median.step_ms, p.step_ms.p10, p.step_ms.p90,
                   p.samples_per_second, p.median.comm_ms, p.median.exposed_comm_ms, overlap_fraction(p),
                   compute_comm_ratio(p)});
  return out;
}

Table bucket_text_table(const std::vector<BucketTableRow>& rows) {
  Table t{{"bucket_cap_mb", "buckets", "bucket MiB", "step ms", "step p10-p90", "samples/s", "comm ms", "exposed ms",
           "overlap", "compute/comm"},
          {},
          "lrlrrrrrrr"};
  for (const BucketTableRow& r : rows)
    t.rows.push_back({r.cap, std::to_string(r.bucket_bytes.size()), bucket_sizes_mb(r.bucket_bytes), f1(r.step_ms),
                      spread(r.step_p10_ms, r.step_p90_ms), f1(r.samples_per_second), f1(r.comm_ms),
                      f1(r.exposed_comm_ms), pct(r.overlap), ratio(r.compute_comm)});
  return t;
}

Table bucket_latex_table(const std::vector<BucketTableRow>& rows) {
  Table t{{"Bucket cap (MB)", "Buckets", "Step (ms)", "Exposed comm (ms)", "Overlap", "Compute/comm"}, {}, "lrrrrr"};
  for (const BucketTableRow& r : rows)
    t.rows.push_back({r.cap, std::to_string(r.bucket_bytes.size()), f1(r.step_ms), f1(r.exposed_comm_ms),
                      pct(r.overlap), ratio(r.compute_comm)});
  return t;
}

std::vector<StepTableRow> step_table_rows(const StepBench& s) {
  std::vector<StepTableRow> out;
  for (const Profile& p : s.cases)
    out.push_back({p.facts.precision, p.facts.world_size, p.facts.per_device_batch, p.samples_per_second,
                   p.median.step_ms, p.step_ms.p10, p.step_ms.p90, p.median.forward_ms, p.median.backward_ms,
                   p.median.optimizer_ms, p.peak_memory_bytes});
  return out;
}

Table step_text_table(const std::vector<StepTableRow>& rows) {
  Table t{{"precision", "ranks", "batch", "samples/s", "step ms", "step p10-p90", "forward ms", "backward ms",
           "optimizer ms", "peak MiB"},
          {},
          "lrrrrrrrrr"};
  for (const StepTableRow& r : rows)
    t.rows.push_back({r.precision, std::to_string(r.ranks), std::to_string(r.per_device_batch),
                      f1(r.samples_per_second), f1(r.step_ms), spread(r.step_p10_ms, r.step_p90_ms), f1(r.forward_ms),
                      f1(r.backward_ms), f1(r.optimizer_ms), mib(r.peak_memory_bytes)});
  return t;
}

Table step_latex_table(const std::vector<StepTableRow>& rows) {
  Table t{{"Precision", "Samples/s", "Step (ms)", "Peak memory (MiB)"}, {}, "lrrr"};
  for (const StepTableRow& r : rows)
    t.rows.push_back({r.precision, f1(r.samples_per_second), f1(r.step_ms), mib(r.peak_memory_bytes)});
  return t;
}

std::vector<TrainingTableRow> training_table_rows(const std::vector<TrainingRun>& runs) {
  std::vector<TrainingTableRow> out;
  for (const TrainingRun& r : runs) {
    double best = 0;
    for (const EvalPoint& e : r.evals) best = std::max(best, e.accuracy);
    const auto epochs = r.epoch_seconds();
    std::optional<double> mean;
    if (!epochs.empty()) {
      mean = 0.0;
      for (const auto& [e, s] : epochs) *mean += s / static_cast<double>(epochs.size());
    }
    out.push_back({r.label, r.world_size, r.final_accuracy, best, r.evals.size(), mean, r.train_seconds,
                   r.samples_per_second, r.dir.string()});
  }
  return out;
}

Table training_table(const std::vector<TrainingTableRow>& rows) {
  Table t{{"run", "ranks", "final accuracy", "best accuracy", "epochs", "mean epoch s (2..)", "train s", "samples/s",
           "dir"},
          {},
          "lrrrrrrrl"};
  for (const TrainingTableRow& r : rows)
    t.rows.push_back({r.label, std::to_string(r.ranks), fmt::format("{:.4f}", r.final_accuracy),
                      fmt::format("{:.4f}", r.best_accuracy), std::to_string(r.evaluations),
                      r.mean_epoch_seconds ? f1(*r.mean_epoch_seconds) : "-", f1(r.train_seconds),
                      f1(r.samples_per_second), r.dir});
  return t;
}

std::vector<CaseTableRow> case_table_rows(const BenchFolder& b) {
  std::vector<CaseTableRow> out;
  if (b.scaling) {
    const std::vector<ScalingRow> rows = scaling_table(b.scaling->cases);
    for (const Profile& p : b.scaling->cases) {
      auto r = std::find_if(rows.begin(), rows.end(),
                            [&](const ScalingRow& x) { return x.world_size == p.facts.world_size; });
      out.push_back({"scaling", p, r->speedup, r->efficiency});
    }
  }
  if (b.buckets)
    for (const Profile& p : b.buckets->cases) out.push_back({"buckets", p, std::nullopt, std::nullopt});
  if (b.step)
    for (const Profile& p : b.step->cases) out.push_back({"step", p, std::nullopt, std::nullopt});
  return out;
}

Table case_table(const std::vector<CaseTableRow>& rows) {
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
  for (const CaseTableRow& r : rows) {
    const Profile& p = r.profile;
    const RunFacts& f = p.facts;
    const StepSample& m = p.median;
    const double compute_comm = compute_comm_ratio(p);
    t.rows.push_back({r.bench,
                      f.label,
                      std::to_string(f.world_size),
                      f.device,
                      f.backend,
                      std::to_string(f.per_device_batch),
                      std::to_string(f.gradient_accumulation_steps),
                      f.precision,
                      f.comm_hook,
                      f.one_bucket ? "inf" : fmt::format("{:g}", f.bucket_cap_mb),
                      std::to_string(f.bucket_bytes.size()),
                      fixed3(m.step_ms),
                      fixed3(p.step_ms.p10),
                      fixed3(p.step_ms.p90),
                      fmt::format("{:.2f}", p.samples_per_second),
                      r.speedup && !std::isnan(*r.speedup) ? fmt::format("{:.4f}", *r.speedup) : "",
                      r.efficiency && !std::isnan(*r.efficiency) ? fmt::format("{:.4f}", *r.efficiency) : "",
                      fixed3(m.data_wait_ms),
                      fixed3(m.forward_ms),
                      fixed3(m.backward_ms),
                      fixed3(m.backward_compute_ms),
                      fixed3(m.comm_ms),
                      fixed3(m.exposed_comm_ms),
                      fixed3(m.overlap_ms),
                      fixed3(m.optimizer_ms),
                      std::isfinite(compute_comm) ? fixed3(compute_comm) : "",
                      mib(p.peak_memory_bytes),
                      fmt::format("{:.2f}", p.epoch_seconds()),
                      std::to_string(p.step_ms.n)});
  }
  return t;
}

}  // namespace tandem::report
