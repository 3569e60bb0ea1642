// Order statistics of repeated timings: benchmarks report medians and the
// spread between the 10th and 90th percentiles, never a single sample.
#pragma once

#include <cstddef>
#include <vector>

namespace tandem::report {

struct Summary {
  size_t n = 0;
  double median = 0, p10 = 0, p90 = 0, mean = 0, min = 0, max = 0;
};

// Percentiles by linear interpolation between closest ranks (numpy's default);
// an empty input gives all zeros.
Summary summarize(std::vector<double> values);
double percentile(std::vector<double> values, double q);  // q in [0, 100]

}  // namespace tandem::report
