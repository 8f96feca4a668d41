// SvgChart: ticks are 1/2/5 x 10^k and cover the data; text is escaped; non-finite points
// are skipped; an empty chart says so; each series gets its palette colour; each point
// carries its exact value; the legend lies outside the plot area, however many series.
#include "aspen/report/svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "support/report_charts.h"

namespace aspen::report {
namespace {

TEST(SvgChart, TicksAreNiceAndCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const auto ticks = nice_ticks(3, 97);
  EXPECT_EQ(ticks.front(), 20);
  EXPECT_EQ(ticks.back(), 80);
  EXPECT_GE(ticks.size(), 4u);
  EXPECT_LE(ticks.size(), 6u);
  for (double tick : nice_ticks(-0.013, 0.021)) {
    EXPECT_NEAR(std::fmod(std::fabs(tick) + 1e-12, 0.005), 0.0, 1e-9) << tick;
  }
}

TEST(SvgChart, EscapesTextAndSkipsNonFinitePoints) {
  ChartSpec spec;
  spec.title = "a<b & \"c\"";
  spec.x_label = "step";
  spec.series.push_back(
      {"s<1>", {{0, 1}, {1, std::numeric_limits<double>::quiet_NaN()}, {2, 3}}});
  const std::string svg = render_svg_chart(spec);
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find("s&lt;1&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Two finite points: two markers and one polyline in the first palette colour.
  size_t markers = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++markers;
  EXPECT_EQ(markers, 2u);
  EXPECT_NE(svg.find("<polyline fill=\"none\" stroke=\"" + chart_color(0)), std::string::npos);
}

TEST(SvgChart, AChartWithoutFinitePointsSaysNoData) {
  ChartSpec spec;
  spec.title = "empty";
  spec.series.push_back({"x", {{0, std::numeric_limits<double>::infinity()}}});
  EXPECT_NE(render_svg_chart(spec).find("no data"), std::string::npos);
}

TEST(SvgChart, AFlatSeriesStillGetsAVisibleRange) {
  ChartSpec spec;
  spec.series.push_back({"flat", {{0, 0.5}, {1, 0.5}, {2, 0.5}}});
  const std::string svg = render_svg_chart(spec);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgChart, EachPointCarriesItsExactValueAndEachSeriesItsSource) {
  ChartSpec spec;
  spec.title = "exact";
  spec.x_source = "iteration";
  const testing::ChartPoints points = {
      {1, 0.1}, {2, 1.0 / 3.0}, {3, 1e-300}, {4, 123456789.123456789}};
  spec.series.push_back({"thirds", points, "bubbles/rollout_idle"});
  const auto charts = testing::report_charts(render_svg_chart(spec));
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0].x_source, "iteration");
  ASSERT_EQ(charts[0].series.size(), 1u);
  EXPECT_EQ(charts[0].series[0].source, "bubbles/rollout_idle");
  EXPECT_EQ(charts[0].series[0].points, points);  // bit-exact, not rounded for display
}

// The numbers after ` name="` in each occurrence of `tag` inside `svg`.
std::vector<double> attribute_values(const std::string& svg, const std::string& tag,
                                     const std::string& name) {
  std::vector<double> values;
  for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) {
    const std::string element = svg.substr(at, svg.find('>', at) - at);
    values.push_back(std::strtod(testing::report_attribute(element, name).c_str(), nullptr));
  }
  return values;
}

TEST(SvgChart, TheLegendLiesBelowThePlotAreaAndTheChartGrowsToHoldIt) {
  ChartSpec spec;
  spec.title = "bubbles";
  for (int s = 0; s < 10; ++s) {
    spec.series.push_back(
        {"a rather long bubble name " + std::to_string(s), {{0, 1.0 * s}, {1, 0.5}}});
  }
  const std::string svg = render_svg_chart(spec);
  const std::string plot = svg.substr(svg.find("<rect class=\"plot-area\""));
  const std::string plot_rect = plot.substr(0, plot.find('>'));
  const double plot_bottom =
      std::strtod(testing::report_attribute(plot_rect, "y").c_str(), nullptr) +
      std::strtod(testing::report_attribute(plot_rect, "height").c_str(), nullptr);
  ASSERT_GT(plot_bottom, 100);
  const std::string legend = svg.substr(svg.find("<g class=\"legend\""));
  const auto swatch_tops = attribute_values(legend, "<rect", "y");
  const auto text_baselines = attribute_values(legend, "<text", "y");
  ASSERT_EQ(swatch_tops.size(), 10u);
  ASSERT_EQ(text_baselines.size(), 10u);
  // Below the plot area and the x-axis labels (11 px text, baseline at plot bottom + 16),
  // text included (its glyphs rise about 11 px above the baseline).
  for (double top : swatch_tops) EXPECT_GT(top, plot_bottom + 16) << svg;
  for (double baseline : text_baselines) EXPECT_GT(baseline - 11, plot_bottom + 16) << svg;
  // The long names wrap onto several rows, and the SVG is tall enough for the last one.
  EXPECT_GT(*std::max_element(swatch_tops.begin(), swatch_tops.end()),
            *std::min_element(swatch_tops.begin(), swatch_tops.end()));
  const double height =
      std::stod(testing::report_attribute(svg.substr(0, svg.find('>')), "height"));
  EXPECT_GE(height, *std::max_element(text_baselines.begin(), text_baselines.end()) + 3);
  // The plot area keeps the size it has with a one-row legend.
  ChartSpec one = spec;
  one.series.resize(1);
  const std::string one_svg = render_svg_chart(one);
  const std::string one_plot = one_svg.substr(one_svg.find("<rect class=\"plot-area\""));
  EXPECT_EQ(one_plot.substr(0, one_plot.find('>')), plot.substr(0, plot.find('>')));
}

}  // namespace
}  // namespace aspen::report
