#include "report/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace tandem::report {

namespace {
double sorted_percentile(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}
}  // namespace

double percentile(std::vector<double> values, double q) {
  TANDEM_CHECK(q >= 0 && q <= 100, "percentile {} is outside [0, 100]", q);
  std::sort(values.begin(), values.end());
  return sorted_percentile(values, q);
}

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.n = values.size();
  s.median = sorted_percentile(values, 50);
  s.p10 = sorted_percentile(values, 10);
  s.p90 = sorted_percentile(values, 90);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.min = values.front();
  s.max = values.back();
  return s;
}

}  // namespace tandem::report
