// Line and bar charts as standalone SVG documents, with no dependencies: what
// `tandem report` draws its plots with. Output is well-formed XML (text is
// escaped; non-finite values are skipped), opens in any browser, and embeds in
// Markdown and LaTeX (via svg or a converter).
//
// A document holds one or more panels side by side (speedup next to
// efficiency, say). Axes get "nice" ticks (1, 2, 5 x 10^k); a line chart's x
// axis may be logarithmic (bucket sizes from 0.5 to 100 MB).
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tandem::report {

struct Series {
  std::string name;
  std::vector<double> x;  // line charts; ignored by bar charts
  std::vector<double> y;  // bar charts: one value per category
  bool dashed = false;
};

struct ReferenceLine {
  double y = 0;
  std::string label;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_x = false;
  std::vector<std::pair<double, std::string>> x_ticks;  // explicit ticks; empty: automatic
  bool y_from_zero = true;
  std::vector<ReferenceLine> reference_lines;
};

struct BarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<Series> bars;  // grouped side by side, or stacked
  bool stacked = false;
  std::vector<Series> overlays;  // drawn as lines with markers across the categories (y per category)
  std::vector<ReferenceLine> reference_lines;
  std::string value_format = "{:.2f}";  // labels on top of bars ("" for none)
};

using Chart = std::variant<LineChart, BarChart>;

// One SVG document with the panels left to right.
std::string render_svg(const std::vector<Chart>& panels, int panel_width = 640, int panel_height = 420);

// Axis ticks covering [lo, hi]: about `target` values at 1, 2 or 5 x 10^k steps.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// Ticks for a log axis over [lo, hi] (lo > 0): 1, 2, 5 x 10^k inside the range.
std::vector<double> log_ticks(double lo, double hi);
// Text safe inside an XML element or attribute.
std::string xml_escape(const std::string& text);

}  // namespace tandem::report
