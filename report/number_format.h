// How the report spells a number in its tables and text: one decimal for
// milliseconds and samples/s, whole percents for measurements, MiB with one
// decimal, and "-" for a ratio or percentage that does not exist (no
// all-reduce, no baseline).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace tandem::report {

inline std::string f1(double v) { return fmt::format("{:.1f}", v); }
inline std::string f2(double v) { return fmt::format("{:.2f}", v); }
inline std::string mib(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }
inline std::string pct(double f) { return std::isfinite(f) ? fmt::format("{:.0f}%", 100 * f) : "-"; }
// A threshold as a percentage with the digits it has ("20%", "2.5%"), so a
// bound stated in prose is never rounded to a different number.
inline std::string bound_pct(double f) { return fmt::format("{:g}%", 100 * f); }
inline std::string ratio(double r) { return std::isfinite(r) ? fmt::format("{:.2f}", r) : "-"; }
// A p10-p90 spread: "38.0-44.0".
inline std::string spread(double p10, double p90) { return fmt::format("{:.1f}-{:.1f}", p10, p90); }

}  // namespace tandem::report
