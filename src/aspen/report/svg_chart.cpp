#include "aspen/report/svg_chart.h"
#include "aspen/report/imports.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace aspen::report {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string format_number(double value) {
  char buffer[32];
  if (value != 0.0 && (std::fabs(value) >= 1e5 || std::fabs(value) < 1e-3)) {
    std::snprintf(buffer, sizeof(buffer), "%.3g", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  }
  return buffer;
}

// The exact value, for data-x / data-y: 17 significant digits parse back to the same double.
std::string exact_number(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

// Legend geometry, in pixels: rows of entries (swatch, gap, name) below the x-axis label.
constexpr double kLegendRow = 16, kSwatch = 10, kSwatchGap = 4, kEntryGap = 14;
// A generous width per character of the 11 px legend font (sans-serif averages about 6):
// an overestimate only spaces entries further apart; the legend never reaches the plot
// area, which lies above it whatever the text's real width.
constexpr double kCharWidth = 7;

double legend_entry_width(const std::string& name) {
  size_t characters = 0;
  for (unsigned char c : name) characters += (c & 0xC0) != 0x80;  // UTF-8 code points
  return kSwatch + kSwatchGap + kCharWidth * static_cast<double>(characters);
}

// The (x, row) of each series' legend entry: left to right from `left`, wrapping before
// `right_edge`; an entry wider than a whole row gets a row of its own.
std::vector<std::pair<double, int>> legend_positions(const std::vector<ChartSeries>& series,
                                                     double left, double right_edge) {
  std::vector<std::pair<double, int>> positions;
  double x = left;
  int row = 0;
  for (const ChartSeries& s : series) {
    const double width = legend_entry_width(s.name);
    if (x > left && x + width > right_edge) x = left, ++row;
    positions.push_back({x, row});
    x += width + kEntryGap;
  }
  return positions;
}

}  // namespace

std::string chart_color(size_t index) { return kPalette[index % (sizeof(kPalette) / sizeof(*kPalette))]; }

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high) {
  if (!(high > low)) return {low};
  const double span = high - low;
  const double raw = span / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (span / step <= 6.0) break;
  }
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step - 1e-9) * step; tick <= high + step * 1e-9; tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  return ticks;
}

std::string render_svg_chart(const ChartSpec& spec) {
  const double left = 58, right = 12, top = 28, bottom = 44;
  const double plot_w = spec.width - left - right, plot_h = spec.height - top - bottom;
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
  double y_min = x_min, y_max = -x_min;
  for (const auto& series : spec.series) {
    for (const auto& [x, y] : series.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  }
  const bool has_data = std::isfinite(x_min);
  const std::vector<std::pair<double, int>> legend =
      has_data ? legend_positions(spec.series, left, spec.width - right)
               : std::vector<std::pair<double, int>>();
  const int legend_rows = legend.empty() ? 0 : legend.back().second + 1;
  const double legend_top = spec.height + 4;  // below the x-axis label
  const double height = spec.height + (legend_rows > 0 ? 8 + kLegendRow * legend_rows : 0);

  std::ostringstream svg;
  svg << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << spec.width
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << spec.width << " " << height
      << "\" role=\"img\" aria-label=\"" << html_escape(spec.title) << "\" data-x-source=\""
      << html_escape(spec.x_source) << "\">";
  svg << "<text x=\"" << left << "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">"
      << html_escape(spec.title) << "</text>";
  if (!has_data) {
    svg << "<text x=\"" << spec.width / 2 << "\" y=\"" << spec.height / 2
        << "\" text-anchor=\"middle\" fill=\"#888\">no data</text></svg>";
    return svg.str();
  }
  // A flat series still gets a visible band around it.
  if (y_max - y_min < 1e-12) {
    const double pad = std::max(std::fabs(y_max) * 0.1, 1e-3);
    y_min -= pad, y_max += pad;
  }
  if (x_max - x_min < 1e-12) x_min -= 1, x_max += 1;
  const std::vector<double> x_ticks = nice_ticks(x_min, x_max);
  const std::vector<double> y_ticks = nice_ticks(y_min, y_max);
  x_min = std::min(x_min, x_ticks.front()), x_max = std::max(x_max, x_ticks.back());
  y_min = std::min(y_min, y_ticks.front()), y_max = std::max(y_max, y_ticks.back());
  auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return top + (1.0 - (y - y_min) / (y_max - y_min)) * plot_h; };

  svg << "<g font-size=\"11\" fill=\"#444\">";
  for (double tick : y_ticks) {
    svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << py(tick)
        << "\" y2=\"" << py(tick) << "\" stroke=\"#e5e5e5\"/>";
    svg << "<text x=\"" << left - 6 << "\" y=\"" << py(tick) + 4 << "\" text-anchor=\"end\">"
        << format_number(tick) << "</text>";
  }
  for (double tick : x_ticks) {
    svg << "<text x=\"" << px(tick) << "\" y=\"" << top + plot_h + 16
        << "\" text-anchor=\"middle\">" << format_number(tick) << "</text>";
  }
  svg << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << spec.height - 6
      << "\" text-anchor=\"middle\">" << html_escape(spec.x_label) << "</text></g>";
  svg << "<rect class=\"plot-area\" x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w
      << "\" height=\"" << plot_h << "\" fill=\"none\" stroke=\"#999\"/>";

  for (size_t s = 0; s < spec.series.size(); ++s) {
    const ChartSeries& series = spec.series[s];
    const std::string color = chart_color(s);
    std::ostringstream points, markers;
    size_t finite = 0;
    for (const auto& [x, y] : series.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      ++finite;
      points << px(x) << "," << py(y) << " ";
      markers << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"2.5\" fill=\"" << color
              << "\" data-x=\"" << exact_number(x) << "\" data-y=\"" << exact_number(y)
              << "\"><title>" << html_escape(series.name) << " @ " << format_number(x) << ": "
              << format_number(y) << "</title></circle>";
    }
    svg << "<g class=\"series\" data-name=\"" << html_escape(series.name) << "\" data-source=\""
        << html_escape(series.source) << "\">";
    if (finite > 1) {
      svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\""
          << points.str() << "\"/>";
    }
    svg << markers.str() << "</g>";
  }
  svg << "<g class=\"legend\" font-size=\"11\">";
  for (size_t s = 0; s < spec.series.size(); ++s) {
    const auto& [x, row] = legend[s];
    const double y = legend_top + kLegendRow * row;  // the row's top
    svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kSwatch << "\" height=\""
        << kSwatch << "\" fill=\"" << chart_color(s) << "\"/><text x=\"" << x + kSwatch + kSwatchGap
        << "\" y=\"" << y + 9 << "\">" << html_escape(spec.series[s].name) << "</text>";
  }
  svg << "</g>";
  svg << "</svg>";
  return svg.str();
}

}  // namespace aspen::report
