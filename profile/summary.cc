#include "profile/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace tandem::profile {

double percentile(std::vector<double> values, double q) {
  TANDEM_CHECK(!values.empty(), "percentile of no values");
  std::sort(values.begin(), values.end());
  const double pos = q / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Distribution describe(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.min = *std::min_element(values.begin(), values.end());
  d.max = *std::max_element(values.begin(), values.end());
  d.median = percentile(values, 50);
  d.p90 = percentile(std::move(values), 90);
  return d;
}

Summary summarize(const std::vector<StepRecord>& steps) {
  Summary s;
  if (steps.empty()) return s;
  s.steps = static_cast<int64_t>(steps.size());
  s.first_step = steps.front().step;
  s.last_step = steps.back().step;
  s.device_timed = steps.front().device_timed;
  std::vector<double> step_ms, other_ms, comm_ms;
  std::array<std::vector<double>, kNumPhases> phase_ms;
  for (const StepRecord& r : steps) {
    step_ms.push_back(r.step_ms);
    other_ms.push_back(r.other_ms());
    for (size_t i = 0; i < kNumPhases; ++i) phase_ms[i].push_back(r.ms[i]);
    if (r.has_comm) {
      ++s.comm_steps;
      comm_ms.push_back(r.comm_ms);
      s.comm_ms_total += r.comm_ms;
      s.overlap_ms_total += r.overlap_ms;
    }
    s.peak_memory_bytes = std::max(s.peak_memory_bytes, r.peak_memory_bytes);
  }
  s.step_ms = describe(std::move(step_ms));
  s.other_ms = describe(std::move(other_ms));
  for (size_t i = 0; i < kNumPhases; ++i) s.phases[i] = describe(std::move(phase_ms[i]));
  s.comm_ms = describe(std::move(comm_ms));
  if (s.comm_ms_total > 0) s.overlap_pct = 100.0 * s.overlap_ms_total / s.comm_ms_total;
  return s;
}

namespace {

nlohmann::json to_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"median", d.median}, {"p90", d.p90}, {"min", d.min}, {"max", d.max}};
}

nlohmann::json optional_number(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

nlohmann::json to_json(const StepRecord& r) {
  nlohmann::json j = {{"step", r.step}, {"step_ms", r.step_ms}};
  for (Phase p : kAllPhases) j[std::string(phase_name(p)) + "_ms"] = r.ms_of(p);
  j["other_ms"] = r.other_ms();
  nlohmann::json host;
  for (Phase p : kAllPhases) host[std::string(phase_name(p))] = r.host_ms[index_of(p)];
  j["host_ms"] = host;
  j["micro_steps"] = r.micro_steps;
  j["comm_ms"] = r.has_comm ? nlohmann::json(r.comm_ms) : nlohmann::json();
  j["overlap_ms"] = r.has_comm ? nlohmann::json(r.overlap_ms) : nlohmann::json();
  j["overlap_pct"] = optional_number(r.overlap_pct());
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["timing"] = r.device_timed ? "device" : "host";
  return j;
}

nlohmann::json to_json(const Summary& s) {
  nlohmann::json phases;
  for (Phase p : kAllPhases) phases[std::string(phase_name(p))] = to_json(s.phase(p));
  return {{"steps", s.steps},
          {"first_step", s.first_step},
          {"last_step", s.last_step},
          {"timing", s.device_timed ? "device" : "host"},
          {"step_ms", to_json(s.step_ms)},
          {"phases_ms", phases},
          {"other_ms", to_json(s.other_ms)},
          {"comm_steps", s.comm_steps},
          {"comm_ms", to_json(s.comm_ms)},
          {"overlap_pct", optional_number(s.overlap_pct)},
          {"peak_memory_bytes", s.peak_memory_bytes}};
}

std::string format_table(const Summary& s) {
  std::string out = fmt::format("{:<18}{:>10}{:>10}{:>10}{:>8}\n", "phase", "mean ms", "median", "p90", "share");
  const double step = s.step_ms.mean;
  auto row = [&](std::string_view name, const Distribution& d) {
    const double share = step > 0 ? 100.0 * d.mean / step : 0.0;
    out += fmt::format("{:<18}{:>10.3f}{:>10.3f}{:>10.3f}{:>7.1f}%\n", name, d.mean, d.median, d.p90, share);
  };
  for (Phase p : kAllPhases) row(phase_name(p), s.phase(p));
  row("other", s.other_ms);
  row("step", s.step_ms);
  if (s.comm_steps > 0) {
    out += fmt::format("all-reduce busy {:.3f} ms/step (mean), {} overlapped with backward compute\n", s.comm_ms.mean,
                       s.overlap_pct ? fmt::format("{:.1f}%", *s.overlap_pct) : std::string("n/a"));
  }
  out += fmt::format("peak memory {:.1f} MiB ({} timing, steps {}..{})\n",
                     static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0),
                     s.device_timed ? "GPU event" : "host clock", s.first_step, s.last_step);
  return out;
}

}  // namespace tandem::profile
