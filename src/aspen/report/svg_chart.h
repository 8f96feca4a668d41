// SvgChart: a line chart as an inline SVG element, for self-contained HTML reports
// (aspen report) that must render with no scripts, fonts or files from elsewhere.
//
// Each series is a polyline in its own colour (a fixed 10-colour palette, in series
// order) with a legend entry; each point carries a <title> with its x and y, which the
// browser shows on hover. Axes get 4-6 "nice" ticks (1, 2, 5 x 10^k). Non-finite
// points are skipped; a chart with no finite point says "no data".
//
// Layout: the plot area (<rect class="plot-area">) is width x height less the margins
// for the title and the axes. The legend (<g class="legend">) lies BELOW the x-axis
// label, outside the plot area, so it never covers data however many series there
// are: its entries flow left to right and wrap, and each row adds to the SVG's height
// (the <svg> element's height attribute is the real one).
//
// Machine-readable (for readers and tests, which check a chart against its source):
// each series is a <g class="series" data-name=".." data-source=".."> and each of its
// finite points a <circle data-x=".." data-y=".."> with the exact value (%.17g, so it
// parses back to the same double); the <svg> carries data-x-source.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "aspen/report/imports.h"

namespace aspen::report {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  std::string source;  // where the y values came from (e.g. a metrics key); may be empty
};

struct ChartSpec {
  std::string title;
  std::string x_label;
  std::vector<ChartSeries> series;
  int width = 520;
  int height = 280;  // title, plot area and axes; the legend's rows are added below
  std::string x_source;  // where the x values came from; may be empty
};

std::string render_svg_chart(const ChartSpec& spec);

// The palette colour of series `index` ("#1f77b4", ...), for tests and legends.
std::string chart_color(size_t index);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(const std::string& text);

// Tick positions covering [low, high]: 4-6 multiples of 1, 2 or 5 x 10^k.
std::vector<double> nice_ticks(double low, double high);

}  // namespace aspen::report
