#include "report/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/check.h"

namespace tandem::report {

namespace {

using Field = double StepSample::*;
constexpr Field kMeanFields[] = {
    &StepSample::forward_ms,      &StepSample::backward_ms, &StepSample::backward_compute_ms, &StepSample::comm_ms,
    &StepSample::exposed_comm_ms, &StepSample::overlap_ms,  &StepSample::optimizer_ms,        &StepSample::sync_ms};

}  // namespace

Profile aggregate(const RunFacts& facts, const std::vector<std::vector<StepSample>>& per_rank, int warmup_steps,
                  const std::vector<int64_t>& peak_memory_per_rank, double checkpoint_ms) {
  TANDEM_CHECK(!per_rank.empty(), "case '{}': no rank reported any step", facts.label);
  const size_t steps = per_rank[0].size();
  TANDEM_CHECK(steps > 0, "case '{}': no timed steps", facts.label);
  for (size_t r = 0; r < per_rank.size(); ++r)
    TANDEM_CHECK(per_rank[r].size() == steps, "case '{}': rank {} timed {} steps, rank 0 timed {}", facts.label, r,
                 per_rank[r].size(), steps);

  // Combine ranks step by step: the slowest rank's step and data wait, the mean of the rest.
  std::vector<StepSample> combined(steps);
  const double ranks = static_cast<double>(per_rank.size());
  for (size_t i = 0; i < steps; ++i) {
    StepSample& c = combined[i];
    c.logging_step = per_rank[0][i].logging_step;
    for (const auto& rank : per_rank) {
      c.step_ms = std::max(c.step_ms, rank[i].step_ms);
      c.data_wait_ms = std::max(c.data_wait_ms, rank[i].data_wait_ms);
      for (Field f : kMeanFields) c.*f += rank[i].*f / ranks;
    }
  }

  Profile p;
  p.facts = facts;
  p.warmup_steps = warmup_steps;
  auto median_of = [&](Field f, const std::function<bool(const StepSample&)>& keep) {
    std::vector<double> v;
    for (const StepSample& s : combined)
      if (keep(s)) v.push_back(s.*f);
    return summarize(std::move(v));
  };
  auto all = [](const StepSample&) { return true; };
  p.step_ms = median_of(&StepSample::step_ms, all);
  p.median.step_ms = p.step_ms.median;
  p.median.data_wait_ms = median_of(&StepSample::data_wait_ms, all).median;
  for (Field f : kMeanFields) p.median.*f = median_of(f, all).median;
  for (const StepSample& s : combined) p.step_samples_ms.push_back(s.step_ms);
  using Series = std::vector<double> StepSample::*;
  // Per element of a per-step series: the ranks' mean each step, then the median over the steps
  // that have `count` elements. Gradients are always all there; a step timed before DDP's rebuild
  // (no warm-up) has the first layout's buckets, which are not the facts' ones: it is left out.
  auto series_median = [&](Series field, size_t count) {
    std::vector<std::vector<double>> per_element(count);
    for (size_t i = 0; i < steps; ++i) {
      bool complete = true;
      for (const auto& rank : per_rank) complete = complete && (rank[i].*field).size() == count;
      if (!complete) continue;
      for (size_t g = 0; g < count; ++g) {
        double sum = 0;
        for (const auto& rank : per_rank) sum += (rank[i].*field)[g];
        per_element[g].push_back(sum / ranks);
      }
    }
    std::vector<double> out;
    for (auto& v : per_element) {
      if (v.empty()) return std::vector<double>{};
      out.push_back(summarize(std::move(v)).median);
    }
    return out;
  };
  p.gradient_ready_ms = series_median(&StepSample::gradient_ready_ms, facts.gradient_names.size());
  const size_t buckets = facts.bucket_bytes.size();
  p.bucket_ready_ms = series_median(&StepSample::bucket_ready_ms, buckets);
  p.bucket_comm_start_ms = series_median(&StepSample::bucket_comm_start_ms, buckets);
  p.bucket_comm_end_ms = series_median(&StepSample::bucket_comm_end_ms, buckets);

  const Summary logging = median_of(&StepSample::step_ms, [](const StepSample& s) { return s.logging_step; });
  const Summary plain = median_of(&StepSample::step_ms, [](const StepSample& s) { return !s.logging_step; });
  if (logging.n >= 3 && plain.n >= 3) p.logging_overhead_ms = logging.median - plain.median;

  p.samples_per_second =
      p.median.step_ms > 0 ? static_cast<double>(facts.samples_per_step()) / (p.median.step_ms / 1000.0) : 0;
  for (int64_t b : peak_memory_per_rank) p.peak_memory_bytes = std::max(p.peak_memory_bytes, b);
  p.checkpoint_ms = checkpoint_ms;
  return p;
}

std::vector<ScalingRow> scaling_table(const std::vector<Profile>& profiles) {
  std::vector<ScalingRow> rows;
  for (const Profile& p : profiles) {
    ScalingRow r;
    r.world_size = p.facts.world_size;
    r.samples_per_second = p.samples_per_second;
    r.step_ms = p.median.step_ms;
    r.epoch_seconds = p.epoch_seconds();
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(),
            [](const ScalingRow& a, const ScalingRow& b) { return a.world_size < b.world_size; });
  if (rows.empty()) return rows;
  const ScalingRow& base = rows.front();
  TANDEM_CHECK(base.samples_per_second > 0, "scaling: the {}-rank case has no throughput", base.world_size);
  // Throughput of one rank, assuming the reference world size scaled perfectly.
  const double per_rank_reference = base.samples_per_second / base.world_size;
  for (ScalingRow& r : rows) {
    r.speedup = r.samples_per_second / per_rank_reference;
    r.efficiency = r.speedup / r.world_size;
  }
  return rows;
}

std::string RunFacts::data_description() const {
  if (!synthetic_data) return "real";
  if (synthetic_real_fraction >= 1) return "synthetic full-length";
  return fmt::format("synthetic (about {:.0f} % real tokens, the rest padding)", 100 * synthetic_real_fraction);
}

std::string RunFacts::length_description() const {
  if (padding != "longest") return fmt::format("of {} tokens", seq_len);
  if (pad_to_multiple_of > 1)
    return fmt::format("padded to each batch's longest row (a multiple of {}, at most {} tokens)", pad_to_multiple_of,
                       seq_len);
  return fmt::format("padded to each batch's longest row (at most {} tokens)", seq_len);
}

}  // namespace tandem::report
