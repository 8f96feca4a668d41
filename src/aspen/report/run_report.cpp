#include "aspen/report/run_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "aspen/io/jsonl.h"
#include "aspen/report/imports.h"
#include "aspen/report/svg_chart.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every line of metrics.jsonl, and how many of them are RL iterations, evaluations and
// SFT log lines. Charts read ALL lines: a value belongs to a series wherever the train
// loop put it (the periodic evals ride on RL iteration lines as eval_accuracy; only the
// one before RL has a "phase": "eval" line of its own).
struct RunMetrics {
  std::vector<json> lines;
  size_t rl = 0, evaluations = 0, sft = 0;
};

RunMetrics read_metrics(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(path);
  check_input(static_cast<bool>(in), "cannot open the run's metrics", path,
              "give the --out directory of an `aspen train` or `aspen sft` run");
  JsonlReader reader(in, path);
  RunMetrics metrics;
  json line;
  while (reader.next(line)) {
    check_input(line.is_object(), "a metrics line must be a JSON object", reader.location());
    const std::string phase = line.value("phase", "");
    if (phase != "rl" && phase != "eval" && phase != "sft") continue;
    metrics.rl += phase == "rl";
    metrics.sft += phase == "sft";
    metrics.evaluations += line.contains("eval_accuracy") && line["eval_accuracy"].is_number();
    metrics.lines.push_back(std::move(line));
  }
  check_input(!metrics.lines.empty(), "no rl, sft or eval lines: nothing to report", path);
  return metrics;
}

// The optional JSON file `name` of the run directory (null when absent).
json read_optional_json(const std::string& run_dir, const char* name) {
  const fs::path path = fs::path(run_dir) / name;
  if (!fs::exists(path)) return nullptr;
  return parse_json_bounded(read_file(path.string()), path.string());
}

// The number at `path` ("a/b") of `line`, if there is one.
bool number_at(const json& line, const std::string& path, double& value) {
  const json* node = &line;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string key = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!node->is_object() || !node->contains(key)) return false;
    node = &(*node)[key];
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (!node->is_number()) return false;
  value = node->get<double>();
  return true;
}

// Every (x, y) of the lines that have a number at both `x_key` and `y_path`.
ChartSeries series_of(const std::vector<json>& lines, const std::string& x_key,
                      const std::string& y_path, const std::string& name) {
  ChartSeries series{name, {}, y_path};
  for (const json& line : lines) {
    double x = 0, y = 0;
    if (number_at(line, x_key, x) && number_at(line, y_path, y)) series.points.push_back({x, y});
  }
  return series;
}

// The numeric keys of the object `key` over all lines, in first-seen order.
std::vector<std::string> numeric_keys(const std::vector<json>& lines, const std::string& key) {
  std::vector<std::string> keys;
  for (const json& line : lines) {
    if (!line.contains(key) || !line[key].is_object()) continue;
    for (const auto& [name, value] : line[key].items()) {
      if (value.is_number() && std::find(keys.begin(), keys.end(), name) == keys.end()) {
        keys.push_back(name);
      }
    }
  }
  return keys;
}

struct Chart {
  ChartSpec spec;
  bool has_data() const {
    for (const auto& series : spec.series) {
      if (!series.points.empty()) return true;
    }
    return false;
  }
};

Chart rl_chart(const RunMetrics& metrics, const std::string& title,
               const std::vector<std::pair<std::string, std::string>>& paths_and_names) {
  Chart chart;
  chart.spec.title = title;
  chart.spec.x_label = "iteration";
  chart.spec.x_source = "iteration";
  for (const auto& [path, name] : paths_and_names) {
    ChartSeries series = series_of(metrics.lines, "iteration", path, name);
    if (!series.points.empty()) chart.spec.series.push_back(std::move(series));
  }
  return chart;
}

std::vector<Chart> charts_of(const RunMetrics& metrics) {
  std::vector<Chart> charts;
  charts.push_back(rl_chart(metrics, "Reward", {{"reward_mean", "reward_mean"}}));
  charts.push_back(
      rl_chart(metrics, "Accuracy", {{"accuracy", "training samples"}, {"eval_accuracy", "eval"}}));
  charts.push_back(rl_chart(metrics, "Response length (tokens)",
                            {{"response_length_mean", "mean"}, {"response_length_max", "max"}}));
  charts.push_back(rl_chart(metrics, "KL", {{"kl", "kl"}, {"approx_kl", "approx_kl"}}));
  charts.push_back(rl_chart(metrics, "Entropy", {{"entropy", "entropy"}}));
  charts.push_back(rl_chart(metrics, "Clip fraction", {{"clip_frac", "clip_frac"}}));
  charts.push_back(rl_chart(metrics, "Grad norm", {{"grad_norm", "grad_norm"}}));
  std::vector<std::pair<std::string, std::string>> bubbles;
  for (const auto& key : numeric_keys(metrics.lines, "bubbles")) {
    bubbles.push_back({"bubbles/" + key, key});
  }
  charts.push_back(rl_chart(metrics, "Bubbles (fraction of the iteration)", bubbles));
  std::vector<std::pair<std::string, std::string>> stages;
  for (const auto& key : numeric_keys(metrics.lines, "stage_seconds")) {
    stages.push_back({"stage_seconds/" + key, key});
  }
  charts.push_back(rl_chart(metrics, "Stage seconds per iteration", stages));
  charts.push_back(rl_chart(metrics, "Rollout vs trainer log-prob |diff|",
                            {{"rollout_logprob_diff_mean", "mean"},
                             {"rollout_logprob_diff_max", "max"}}));
  // algorithm.rollout_correction only (algo/rollout_correction.h).
  charts.push_back(rl_chart(metrics, "Rollout correction (proximal / rollout policy)",
                            {{"rollout_is_mean", "IS weight after truncation, mean"},
                             {"rollout_is_ratio_mean", "token ratio before truncation, mean"},
                             {"rollout_is_ratio_max", "token ratio, max"},
                             {"rollout_is_ratio_min", "token ratio, min"},
                             {"rollout_is_truncated_frac", "share of tokens truncated"},
                             {"rollout_rs_masked_frac", "share of tokens rejected"},
                             {"rollout_corr_kl", "KL(rollout || proximal), k3"}}));
  // MoE models only (dense runs have none of these keys, and empty charts are dropped).
  charts.push_back(rl_chart(metrics, "MoE routing",
                            {{"router_aux_loss", "load-balancing loss"},
                             {"router_load_max", "busiest expert / mean, worst layer"},
                             {"router_load_mean", "busiest expert / mean, mean of layers"},
                             {"router_topk_mismatch", "trainer top-k != rollout top-k"}}));
  // Multi-turn runs only (rollout.environment; docs/agents.md "Metrics"); bubbles.tool_wait
  // is on the bubbles chart.
  charts.push_back(rl_chart(metrics, "Trajectories (per trajectory)",
                            {{"turns_mean", "turns"},
                             {"tool_calls_mean", "tool calls"},
                             {"tool_errors_mean", "tool errors"},
                             {"eval_tool_calls_mean", "tool calls, greedy eval"}}));
  charts.push_back(rl_chart(metrics, "Tool wait (seconds per trajectory in its environment)",
                            {{"tool_wait_s_mean", "mean"}}));
  charts.push_back(rl_chart(metrics, "Throughput (tokens/s)",
                            {{"tokens_per_second", "trained tokens/s"},
                             {"effective_tps", "effective tokens/s"}}));
  Chart sft;
  sft.spec.title = "SFT loss (nll)";
  sft.spec.x_label = "step";
  sft.spec.x_source = "step";
  sft.spec.series.push_back(series_of(metrics.lines, "step", "nll", "nll"));
  charts.push_back(std::move(sft));
  std::vector<Chart> kept;
  for (auto& chart : charts) {
    if (chart.has_data()) kept.push_back(std::move(chart));
  }
  return kept;
}

std::string format_fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

std::string stage_table(const RunMetrics& metrics) {
  std::map<std::string, double> totals;
  double all = 0;
  for (const json& line : metrics.lines) {
    if (!line.contains("stage_seconds") || !line["stage_seconds"].is_object()) continue;
    for (const auto& [stage, value] : line["stage_seconds"].items()) {
      if (!value.is_number()) continue;
      totals[stage] += value.get<double>();
      all += value.get<double>();
    }
  }
  if (totals.empty()) return "";
  std::ostringstream html;
  html << "<h2>Stage time</h2><table><tr><th>stage</th><th>seconds</th><th>share</th></tr>";
  for (const auto& [stage, seconds] : totals) {
    html << "<tr><td>" << html_escape(stage) << "</td><td>" << format_fixed(seconds, 3)
         << "</td><td>" << format_fixed(all > 0 ? 100.0 * seconds / all : 0.0, 1) << "%</td></tr>";
  }
  html << "</table>";
  return html.str();
}

std::string summary_table(const json& summary) {
  if (!summary.is_object()) return "";
  std::ostringstream html;
  html << "<h2>Summary</h2><table>";
  for (const auto& [key, value] : summary.items()) {
    html << "<tr><th>" << html_escape(key) << "</th><td>"
         << html_escape(value.is_string() ? value.get<std::string>() : value.dump()) << "</td></tr>";
  }
  html << "</table>";
  return html.str();
}

std::string now_utc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return buffer;
}

}  // namespace

std::string render_run_report(const std::string& run_dir) {
  const RunMetrics metrics = read_metrics(run_dir);
  const json summary = read_optional_json(run_dir, "summary.json");
  const json config = read_optional_json(run_dir, "config.json");
  const std::string name = fs::path(run_dir).lexically_normal().string();

  std::ostringstream html;
  html << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Aspen run "
       << html_escape(name) << "</title><style>"
       << "body{font-family:sans-serif;margin:24px;color:#222}"
       << ".charts{display:flex;flex-wrap:wrap;gap:12px}"
       << ".chart{border:1px solid #ddd;background:#fff}"
       << "table{border-collapse:collapse;margin:8px 0}"
       << "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:13px}"
       << "pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto}"
       << "</style></head><body>";
  html << "<h1>Aspen run <code>" << html_escape(name) << "</code></h1>";
  html << "<p>" << metrics.rl << " RL iterations, " << metrics.evaluations
       << " evaluations, " << metrics.sft << " SFT log lines. Report written "
       << now_utc() << ".</p>";
  html << summary_table(summary);
  html << "<h2>Metrics</h2><div class=\"charts\">";
  for (const Chart& chart : charts_of(metrics)) html << render_svg_chart(chart.spec);
  html << "</div>";
  html << stage_table(metrics);
  if (!config.is_null()) {
    html << "<h2>Config</h2><details open><summary>config.json</summary><pre>"
         << html_escape(config.dump(2)) << "</pre></details>";
  }
  html << "</body></html>\n";
  return html.str();
}

}  // namespace aspen::report
