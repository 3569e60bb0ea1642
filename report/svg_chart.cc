#include "report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace tandem::report {

namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
const char* color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

// Plot area inside a panel.
constexpr double kLeft = 72, kRight = 24, kTop = 44, kBottom = 58;

std::string num(double v) {
  if (v == 0) return "0";
  std::string s = fmt::format("{:.6g}", v);
  return s;
}

std::string coord(double v) { return fmt::format("{:.2f}", v); }

std::string text(double x, double y, const std::string& s, const std::string& attrs = "") {
  return fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>\n", coord(x), coord(y), attrs.empty() ? "" : " ", attrs,
                     xml_escape(s));
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

// Maps data to pixels inside one panel.
struct Frame {
  double x0, y0, w, h;  // plot area
  double xlo, xhi, ylo, yhi;
  bool log_x = false;
  double px(double x) const {
    if (log_x) return x0 + (std::log10(x) - std::log10(xlo)) / (std::log10(xhi) - std::log10(xlo)) * w;
    return x0 + (x - xlo) / (xhi - xlo) * w;
  }
  double py(double y) const { return y0 + h - (y - ylo) / (yhi - ylo) * h; }
};

// Raises the top of the y range so that a legend of `entries` lines in the
// plot's top right corner sits above the data (plot_h: the plot's height in pixels).
void room_for_legend(double lo, double& hi, size_t entries, double plot_h) {
  if (entries < 2 || hi <= lo) return;
  const double legend_px = 14 + 16 * static_cast<double>(entries);
  const double share = std::min(0.6, legend_px / plot_h);
  hi = lo + (hi - lo) / (1 - share);
}

void widen(double& lo, double& hi) {
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
}

std::string frame_and_labels(const Frame& f, const std::string& title, const std::string& x_label,
                             const std::string& y_label, double panel_x, double panel_w, double panel_h) {
  std::string s;
  s += text(panel_x + panel_w / 2, 24, title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  s += text(f.x0 + f.w / 2, panel_h - 12, x_label, "text-anchor=\"middle\" font-size=\"12\"");
  s += fmt::format(
      "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
      coord(panel_x + 16), coord(f.y0 + f.h / 2), xml_escape(y_label));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", coord(f.x0),
                   coord(f.y0), coord(f.w), coord(f.h));
  return s;
}

std::string y_axis(const Frame& f, const std::vector<double>& ticks) {
  std::string s;
  for (double t : ticks) {
    const double y = f.py(t);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", coord(f.x0), coord(y),
                     coord(f.x0 + f.w), coord(y));
    s += text(f.x0 - 6, y + 4, num(t), "text-anchor=\"end\" font-size=\"11\"");
  }
  return s;
}

std::string reference_lines(const Frame& f, const std::vector<ReferenceLine>& lines) {
  std::string s;
  for (const ReferenceLine& r : lines) {
    if (!std::isfinite(r.y) || r.y < f.ylo || r.y > f.yhi) continue;
    const double y = f.py(r.y);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\" stroke-dasharray=\"6,4\"/>\n",
                     coord(f.x0), coord(y), coord(f.x0 + f.w), coord(y));
    s += text(f.x0 + f.w - 4, y - 4, r.label, "text-anchor=\"end\" font-size=\"10\" fill=\"#555\"");
  }
  return s;
}

std::string legend(const Frame& f, const std::vector<std::pair<std::string, bool>>& entries, size_t color_offset = 0) {
  if (entries.empty()) return "";
  size_t longest = 0;
  for (const auto& [name, dashed] : entries) longest = std::max(longest, name.size());
  const double w = 34 + 6.5 * static_cast<double>(longest), h = 8 + 16 * static_cast<double>(entries.size());
  const double x = f.x0 + f.w - w - 6, y = f.y0 + 6;
  std::string s = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"white\" fill-opacity=\"0.85\" "
      "stroke=\"#bbb\"/>\n",
      coord(x), coord(y), coord(w), coord(h));
  for (size_t i = 0; i < entries.size(); ++i) {
    const double ly = y + 14 + 16 * static_cast<double>(i);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"{}/>\n",
                     coord(x + 6), coord(ly - 4), coord(x + 26), coord(ly - 4), color(i + color_offset),
                     entries[i].second ? " stroke-dasharray=\"5,3\"" : "");
    s += text(x + 30, ly, entries[i].first, "font-size=\"11\"");
  }
  return s;
}

std::string polyline(const Frame& f, const std::vector<std::pair<double, double>>& pts, const char* stroke,
                     bool dashed) {
  std::string s;
  if (pts.size() >= 2) {
    std::string points;
    for (auto [x, y] : pts) points += coord(f.px(x)) + "," + coord(f.py(y)) + " ";
    points.pop_back();
    s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", points, stroke,
                     dashed ? " stroke-dasharray=\"6,4\"" : "");
  }
  for (auto [x, y] : pts)
    s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>\n", coord(f.px(x)), coord(f.py(y)), stroke);
  return s;
}

std::string render(const LineChart& c, double panel_x, double w, double h) {
  Range xr, yr;
  for (const Series& s : c.series) {
    TANDEM_CHECK(s.x.size() == s.y.size(), "chart '{}': series '{}' has {} x values and {} y values", c.title, s.name,
                 s.x.size(), s.y.size());
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i]) || (c.log_x && s.x[i] <= 0)) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
    }
  }
  for (const ReferenceLine& r : c.reference_lines) yr.add(r.y);
  if (xr.empty()) xr = {c.log_x ? 1.0 : 0.0, c.log_x ? 10.0 : 1.0};
  if (yr.empty()) yr = {0, 1};
  if (c.y_from_zero) yr.lo = std::min(yr.lo, 0.0);
  widen(yr.lo, yr.hi);
  room_for_legend(yr.lo, yr.hi, c.series.size(), h - kTop - kBottom);
  if (!c.log_x) widen(xr.lo, xr.hi);
  if (c.log_x && xr.lo == xr.hi) {
    xr.lo /= 2;
    xr.hi *= 2;
  }
  const std::vector<double> yt = nice_ticks(yr.lo, yr.hi);
  Frame f{panel_x + kLeft, kTop, w - kLeft - kRight, h - kTop - kBottom, xr.lo, xr.hi, yt.front(), yt.back(), c.log_x};
  if (c.log_x) {
    f.xlo = xr.lo / 1.25;
    f.xhi = xr.hi * 1.25;
  } else {
    const std::vector<double> xt = nice_ticks(xr.lo, xr.hi);
    f.xlo = xt.front();
    f.xhi = xt.back();
  }
  std::string s = frame_and_labels(f, c.title, c.x_label, c.y_label, panel_x, w, h);
  s += y_axis(f, yt);
  std::vector<std::pair<double, std::string>> xticks = c.x_ticks;
  if (xticks.empty())
    for (double t : c.log_x ? log_ticks(f.xlo, f.xhi) : nice_ticks(f.xlo, f.xhi)) xticks.emplace_back(t, num(t));
  for (const auto& [t, label] : xticks) {
    if (!std::isfinite(t) || t < f.xlo || t > f.xhi || (c.log_x && t <= 0)) continue;
    const double x = f.px(t);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#eee\"/>\n", coord(x), coord(f.y0),
                     coord(x), coord(f.y0 + f.h));
    s += text(x, f.y0 + f.h + 16, label, "text-anchor=\"middle\" font-size=\"11\"");
  }
  s += reference_lines(f, c.reference_lines);
  std::vector<std::pair<std::string, bool>> entries;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& se = c.series[i];
    std::vector<std::pair<double, double>> pts;
    for (size_t k = 0; k < se.x.size(); ++k)
      if (std::isfinite(se.x[k]) && std::isfinite(se.y[k]) && !(c.log_x && se.x[k] <= 0))
        pts.emplace_back(se.x[k], se.y[k]);
    s += polyline(f, pts, color(i), se.dashed);
    entries.emplace_back(se.name, se.dashed);
  }
  if (c.series.size() > 1) s += legend(f, entries);
  return s;
}

std::string render(const BarChart& c, double panel_x, double w, double h) {
  const size_t n = c.categories.size();
  for (const Series& s : c.bars)
    TANDEM_CHECK(s.y.size() == n, "chart '{}': series '{}' has {} values for {} categories", c.title, s.name,
                 s.y.size(), n);
  for (const Series& s : c.overlays)
    TANDEM_CHECK(s.y.size() == n, "chart '{}': overlay '{}' has {} values for {} categories", c.title, s.name,
                 s.y.size(), n);
  Range yr;
  yr.add(0);
  for (size_t k = 0; k < n; ++k) {
    double stack = 0;
    for (const Series& s : c.bars) {
      if (!std::isfinite(s.y[k])) continue;
      if (c.stacked)
        stack += std::max(0.0, s.y[k]);
      else
        yr.add(s.y[k]);
    }
    if (c.stacked) yr.add(stack);
    for (const Series& s : c.overlays) yr.add(s.y[k]);
  }
  for (const ReferenceLine& r : c.reference_lines) yr.add(r.y);
  widen(yr.lo, yr.hi);
  yr.hi += (yr.hi - yr.lo) * 0.08;  // room for value labels
  room_for_legend(yr.lo, yr.hi, c.bars.size() + c.overlays.size(), h - kTop - kBottom);
  const std::vector<double> yt = nice_ticks(yr.lo, yr.hi);
  Frame f{panel_x + kLeft,    kTop,     w - kLeft - kRight,
          h - kTop - kBottom, 0,        static_cast<double>(std::max<size_t>(n, 1)),
          yt.front(),         yt.back()};
  std::string s = frame_and_labels(f, c.title, c.x_label, c.y_label, panel_x, w, h);
  s += y_axis(f, yt);
  const double slot = f.w / static_cast<double>(std::max<size_t>(n, 1));
  const size_t groups = c.stacked ? 1 : std::max<size_t>(c.bars.size(), 1);
  const double bar_w = slot * 0.7 / static_cast<double>(groups);
  for (size_t k = 0; k < n; ++k) {
    const double cx = f.x0 + slot * (static_cast<double>(k) + 0.5);
    s += text(cx, f.y0 + f.h + 16, c.categories[k], "text-anchor=\"middle\" font-size=\"11\"");
    double base = 0;
    for (size_t i = 0; i < c.bars.size(); ++i) {
      const double v = c.bars[i].y[k];
      if (!std::isfinite(v)) continue;
      const double x = c.stacked ? cx - bar_w / 2 : cx - slot * 0.35 + bar_w * static_cast<double>(i);
      const double lo = c.stacked ? base : 0, hi = c.stacked ? base + std::max(0.0, v) : v;
      const double top = f.py(std::max(lo, hi)), bottom = f.py(std::min(lo, hi));
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
                       coord(x), coord(top), coord(bar_w * 0.95), coord(bottom - top), color(i),
                       xml_escape(c.bars[i].name + ": " + num(v)));
      if (!c.stacked && !c.value_format.empty())
        s += text(x + bar_w * 0.475, top - 4, fmt::format(fmt::runtime(c.value_format), v),
                  "text-anchor=\"middle\" font-size=\"10\"");
      if (c.stacked) base = hi;
    }
    if (c.stacked && !c.value_format.empty())
      s += text(cx, f.py(base) - 4, fmt::format(fmt::runtime(c.value_format), base),
                "text-anchor=\"middle\" font-size=\"10\"");
  }
  s += reference_lines(f, c.reference_lines);
  std::vector<std::pair<std::string, bool>> entries;
  for (const Series& b : c.bars) entries.emplace_back(b.name, false);
  for (size_t i = 0; i < c.overlays.size(); ++i) {
    std::vector<std::pair<double, double>> pts;
    for (size_t k = 0; k < n; ++k)
      if (std::isfinite(c.overlays[i].y[k])) pts.emplace_back(static_cast<double>(k) + 0.5, c.overlays[i].y[k]);
    s += polyline(f, pts, color(c.bars.size() + i), c.overlays[i].dashed);
    entries.emplace_back(c.overlays[i].name, c.overlays[i].dashed);
  }
  if (entries.size() > 1) s += legend(f, entries);
  return s;
}

}  // namespace

std::string xml_escape(const std::string& t) {
  std::string out;
  out.reserve(t.size());
  for (char ch : t) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
          out += ' ';
        else
          out += ch;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  TANDEM_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && target >= 2, "nice_ticks: bad range [{}, {}]", lo,
               hi);
  if (lo == hi) widen(lo, hi);
  const double raw = (hi - lo) / (target - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;  // in [1, 10)
  const double step = (r < 1.5 ? 1.0 : r < 3 ? 2.0 : r < 7 ? 5.0 : 10.0) * mag;
  const int64_t first = static_cast<int64_t>(std::floor(lo / step + 1e-9));
  const int64_t last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t i = first; i <= last; ++i) ticks.push_back(static_cast<double>(i) * step);
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  TANDEM_CHECK(lo > 0 && hi >= lo, "log_ticks: bad range [{}, {}]", lo, hi);
  std::vector<double> ticks;
  for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * std::pow(10.0, e);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  return ticks;
}

std::string render_svg(const std::vector<Chart>& panels, int panel_width, int panel_height) {
  TANDEM_CHECK(!panels.empty(), "render_svg: no panels");
  const double w = panel_width, h = panel_height;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      panel_width * static_cast<int>(panels.size()), panel_height);
  for (size_t i = 0; i < panels.size(); ++i) {
    const double x = w * static_cast<double>(i);
    s += "<g>\n";
    s += std::visit([&](const auto& c) { return render(c, x, w, h); }, panels[i]);
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace tandem::report
