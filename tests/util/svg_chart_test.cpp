// SvgChart: ticks are 1/2/5 x 10^k and cover the data; text is escaped; non-finite points
// are skipped; an empty chart says so; each series gets its palette colour.
#include "aspen/util/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace aspen {
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

}  // namespace
}  // namespace aspen
