// The SVG writer: documents parse as XML (libxml2, an independent parser),
// draw what they are given, and escape text.
#include "report/svg_chart.h"

#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <cmath>
#include <string>

#include "core/check.h"
#include "tests/report/xml_check.h"

namespace tandem::report {
namespace {

int count_elements(const std::string& svg, const char* name) { return testing::count_xml_elements(svg, name); }

std::string root_name(const std::string& svg) {
  xmlDocPtr doc = xmlReadMemory(svg.data(), static_cast<int>(svg.size()), "chart.svg", nullptr, XML_PARSE_NONET);
  if (!doc) return "";
  std::string name = reinterpret_cast<const char*>(xmlDocGetRootElement(doc)->name);
  xmlFreeDoc(doc);
  return name;
}

TEST(SvgChart, LineChartIsWellFormedSvgWithOnePolylinePerSeries) {
  LineChart c;
  c.title = "Epoch time";
  c.series = {{"1 rank", {1, 2, 3}, {10, 11, 12}}, {"2 ranks", {1, 2, 3}, {6, 6.5, 7}, true}};
  const std::string svg = render_svg({c});
  EXPECT_EQ(root_name(svg), "svg");
  EXPECT_EQ(count_elements(svg, "polyline"), 2);
  EXPECT_EQ(count_elements(svg, "circle"), 6);
}

TEST(SvgChart, GroupedBarChartDrawsOneRectPerValue) {
  BarChart c;
  c.categories = {"1", "2", "4"};
  c.bars = {{"speedup", {}, {1, 1.8, 3.5}}, {"ideal", {}, {1, 2, 4}}};
  const std::string svg = render_svg({c});
  // 6 bars, the page background, the plot frame, and a legend box.
  EXPECT_EQ(count_elements(svg, "rect"), 6 + 3);
}

TEST(SvgChart, StackedBarsStackAndSkipNothing) {
  BarChart c;
  c.categories = {"a", "b"};
  c.stacked = true;
  c.bars = {{"x", {}, {1, 2}}, {"y", {}, {3, 4}}};
  EXPECT_EQ(count_elements(render_svg({c}), "rect"), 4 + 3);
}

TEST(SvgChart, PanelsSitSideBySideInOneDocument) {
  BarChart a, b;
  a.categories = b.categories = {"x"};
  a.bars = b.bars = {{"v", {}, {1}}};
  const std::string svg = render_svg({a, b}, 300, 200);
  EXPECT_NE(svg.find("width=\"600\""), std::string::npos);
  EXPECT_EQ(count_elements(svg, "g"), 2);
}

TEST(SvgChart, TextIsEscaped) {
  LineChart c;
  c.title = "<b> & \"quotes\"";
  c.series = {{"a<b", {1, 2}, {1, 2}}, {"c&d", {1, 2}, {2, 1}}};
  const std::string svg = render_svg({c});
  EXPECT_GE(count_elements(svg, "text"), 3);
  EXPECT_NE(svg.find("&lt;b&gt; &amp; &quot;quotes&quot;"), std::string::npos);
}

TEST(SvgChart, NonFiniteValuesAreSkipped) {
  LineChart c;
  c.series = {{"s", {1, 2, 3}, {1, std::nan(""), INFINITY}}};
  const std::string svg = render_svg({c});
  EXPECT_EQ(count_elements(svg, "circle"), 1);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgChart, LogAxisDropsNonPositiveX) {
  LineChart c;
  c.log_x = true;
  c.series = {{"s", {0, 0.5, 5, 100}, {1, 2, 3, 4}}};
  EXPECT_EQ(count_elements(render_svg({c}), "circle"), 3);
}

TEST(SvgChart, SeriesOfUnequalLengthIsAnError) {
  LineChart c;
  c.series = {{"s", {1, 2}, {1}}};
  EXPECT_THROW(render_svg({c}), Error);
  BarChart b;
  b.categories = {"a", "b"};
  b.bars = {{"v", {}, {1}}};
  EXPECT_THROW(render_svg({b}), Error);
}

TEST(SvgChart, EmptyChartStillRenders) {
  EXPECT_EQ(root_name(render_svg({LineChart{}})), "svg");
  EXPECT_EQ(root_name(render_svg({BarChart{}})), "svg");
}

TEST(NiceTicks, StepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(nice_ticks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 1).size(), 6u);
  EXPECT_NEAR(nice_ticks(0, 1)[3], 0.6, 1e-12);
  EXPECT_EQ(nice_ticks(0, 3), (std::vector<double>{0, 1, 2, 3}));
  const std::vector<double> t = nice_ticks(0, 87);
  EXPECT_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 87);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 20);
}

TEST(NiceTicks, CoverANegativeRange) {
  const std::vector<double> t = nice_ticks(-3, 7);
  EXPECT_LE(t.front(), -3);
  EXPECT_GE(t.back(), 7);
}

TEST(LogTicks, AreOneTwoFiveDecades) {
  EXPECT_EQ(log_ticks(0.4, 120), (std::vector<double>{0.5, 1, 2, 5, 10, 20, 50, 100}));
}

TEST(XmlEscape, EscapesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(xml_escape("a<b>&'\"\x01"), "a&lt;b&gt;&amp;&apos;&quot; ");
}

}  // namespace
}  // namespace tandem::report
