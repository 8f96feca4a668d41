// The charts of an `aspen report` page as its SVG declares them (report/svg_chart.h's
// machine-readable attributes: data-x-source on the chart, data-source on each series,
// data-x / data-y on each point), and the points metrics.jsonl holds for a series, read
// here independently of the report's own code. Tests hold every chart against the file
// it was drawn from: a value the report misses (or invents) is a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace aspen::testing {

using ChartPoints = std::vector<std::pair<double, double>>;

struct ReportSeries {
  std::string name, source;
  ChartPoints points;
};

struct ReportChart {
  std::string title, x_source;
  std::vector<ReportSeries> series;
};

// The value of attribute `name` in the tag text `tag`, with the report's escapes undone.
inline std::string report_attribute(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t start = tag.find(key);
  if (start == std::string::npos) return "";
  const size_t from = start + key.size();
  std::string value = tag.substr(from, tag.find('"', from) - from);
  const std::pair<const char*, const char*> escapes[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
  for (const auto& [escaped, plain] : escapes) {
    for (size_t at = value.find(escaped); at != std::string::npos;
         at = value.find(escaped, at + 1)) {
      value.replace(at, std::string(escaped).size(), plain);
    }
  }
  return value;
}

// Every <svg class="chart"> of `html`, its series and their points, in page order.
inline std::vector<ReportChart> report_charts(const std::string& html) {
  std::vector<ReportChart> charts;
  for (size_t at = html.find("<svg class=\"chart\""); at != std::string::npos;
       at = html.find("<svg class=\"chart\"", at + 1)) {
    const std::string svg = html.substr(at, html.find("</svg>", at) - at);
    const std::string open = svg.substr(0, svg.find('>'));
    ReportChart chart{
        report_attribute(open, "aria-label"), report_attribute(open, "data-x-source"), {}};
    for (size_t g = svg.find("<g class=\"series\""); g != std::string::npos;
         g = svg.find("<g class=\"series\"", g + 1)) {
      const std::string group = svg.substr(g, svg.find("</g>", g) - g);
      const std::string group_open = group.substr(0, group.find('>'));
      ReportSeries series{report_attribute(group_open, "data-name"),
                          report_attribute(group_open, "data-source"),
                          {}};
      for (size_t c = group.find("<circle"); c != std::string::npos;
           c = group.find("<circle", c + 1)) {
        const std::string circle = group.substr(c, group.find('>', c) - c);
        series.points.push_back({std::strtod(report_attribute(circle, "data-x").c_str(), nullptr),
                                 std::strtod(report_attribute(circle, "data-y").c_str(), nullptr)});
      }
      chart.series.push_back(std::move(series));
    }
    charts.push_back(std::move(chart));
  }
  return charts;
}

// The JSON lines of a metrics.jsonl file.
inline std::vector<nlohmann::json> metrics_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string text; std::getline(in, text);) {
    if (!text.empty()) lines.push_back(nlohmann::json::parse(text));
  }
  return lines;
}

// The number at `path` ("a/b" for nested keys) of `line`, or null.
inline const nlohmann::json* metrics_number(const nlohmann::json& line, const std::string& path) {
  const nlohmann::json* node = &line;
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    const std::string key = path.substr(start, slash == std::string::npos ? slash : slash - start);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &node->at(key);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return node->is_number() ? node : nullptr;
}

// Every (x, y) of the lines with a number at both `x_key` and `y_path`, in file order:
// what a chart of that series must show, wherever in the file the values sit.
inline ChartPoints metrics_points(const std::vector<nlohmann::json>& lines,
                                  const std::string& x_key, const std::string& y_path) {
  ChartPoints points;
  for (const nlohmann::json& line : lines) {
    const nlohmann::json* x = metrics_number(line, x_key);
    const nlohmann::json* y = metrics_number(line, y_path);
    if (x && y) points.push_back({x->get<double>(), y->get<double>()});
  }
  return points;
}

// Every chart names its x key, every series its key, and each series' points are exactly
// the file's (x, y) of that key. Returns the keys charted.
inline std::vector<std::string> expect_charts_hold_every_metrics_value(
    const std::vector<ReportChart>& charts, const std::vector<nlohmann::json>& lines) {
  std::vector<std::string> charted;
  for (const ReportChart& chart : charts) {
    EXPECT_FALSE(chart.x_source.empty()) << chart.title;
    for (const ReportSeries& series : chart.series) {
      EXPECT_FALSE(series.source.empty()) << chart.title << " / " << series.name;
      EXPECT_EQ(series.points, metrics_points(lines, chart.x_source, series.source))
          << chart.title << " / " << series.name << " (" << series.source << " by "
          << chart.x_source << ")";
      charted.push_back(series.source);
    }
  }
  return charted;
}

}  // namespace aspen::testing
