// `aspen report`: the HTML report of a real (tiny) `aspen train` run, rendered by
// headless Chromium (tools/python/report_render_check.py): every chart of the metrics
// the run logged is there, the series' lines are drawn (their palette colours cover
// pixels of the screenshot), every chart holds every value of its series in the run's
// metrics.jsonl (the periodic evals included, which ride on RL iteration lines), each
// legend's laid-out box lies outside its plot area, and the page logs nothing to the
// console. A run directory without metrics is refused with a one-line error naming the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/oracles.h"
#include "support/report_charts.h"
#include "support/tiny_run_overrides.h"

namespace aspen::cli {
namespace {

using testing::run_command;

TEST(ReportCommand, ChromiumRendersEveryChartOfARealRunWithoutConsoleErrors) {
  const std::string dir = testing::scratch_dir() + "/run";
  std::string train = testing::aspen_cli() + " train --out " + dir;
  for (const auto& o : testing::tiny_run_overrides()) train += " " + o;
  train += " logging.eval_every=2";
  const auto trained = run_command(train);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  const auto report = run_command(testing::aspen_cli() + " report " + dir);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(report.out, dir + "/report.html\n");
  const std::string html = testing::read_text(dir + "/report.html");
  // Self-contained: nothing fetched from elsewhere, no scripts.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("config.json"), std::string::npos);
  EXPECT_NE(html.find("eval_accuracy_after_rl"), std::string::npos);  // summary.json

  const auto rendered = run_command("'" + testing::python() + "' '" +
                                    testing::oracle_script("report_render_check.py") + "' " + dir +
                                    "/report.html " + testing::scratch_dir() + "/report.png");
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  const nlohmann::json seen = nlohmann::json::parse(rendered.out);
  EXPECT_EQ(seen["console"], nlohmann::json::array()) << seen["console"].dump(2);
  const std::vector<std::string> titles = seen["chart_titles"];
  for (const char* expected :
       {"Reward", "Accuracy", "Response length (tokens)", "KL", "Entropy", "Clip fraction",
        "Grad norm", "Bubbles (fraction of the iteration)", "Stage seconds per iteration",
        "Rollout vs trainer log-prob |diff|", "Throughput (tokens/s)", "SFT loss (nll)"}) {
    EXPECT_NE(std::find(titles.begin(), titles.end(), expected), titles.end()) << expected;
  }
  // The lines are drawn: the first two palette colours (every chart's first series, the
  // multi-series charts' second) cover many pixels.
  EXPECT_GT(seen["palette_pixels"]["#1f77b4"].get<int64_t>(), 2000) << seen.dump();
  EXPECT_GT(seen["palette_pixels"]["#ff7f0e"].get<int64_t>(), 300) << seen.dump();
  EXPECT_EQ(seen["size"], nlohmann::json::array({1200, 2400}));

  // Every value: each chart's series are exactly their key's (x, y) in metrics.jsonl, and
  // the keys a reader looks for are charted (every bubble and stage the run logged too).
  const auto lines = testing::metrics_lines(dir + "/metrics.jsonl");
  const auto charted =
      testing::expect_charts_hold_every_metrics_value(testing::report_charts(html), lines);
  std::vector<std::string> expected = {
      "reward_mean", "accuracy", "eval_accuracy", "response_length_mean", "response_length_max",
      "kl", "approx_kl", "entropy", "clip_frac", "grad_norm", "rollout_logprob_diff_mean",
      "rollout_logprob_diff_max", "tokens_per_second", "effective_tps", "nll"};
  for (const auto& line : lines) {
    for (const char* group : {"bubbles", "stage_seconds"}) {
      if (!line.contains(group)) continue;
      for (const auto& [key, value] : line[group].items()) {
        if (value.is_number()) expected.push_back(std::string(group) + "/" + key);
      }
    }
  }
  for (const auto& key : expected) {
    EXPECT_NE(std::find(charted.begin(), charted.end(), key), charted.end()) << key;
  }
  // logging.eval_every=2 of 4 iterations: the eval before RL and after iterations 2 and 4.
  EXPECT_EQ(testing::metrics_points(lines, "iteration", "eval_accuracy").size(), 3u);
  EXPECT_NE(html.find(" 3 evaluations,"), std::string::npos);

  // Legends outside the plot area, as laid out by Chromium with its fonts.
  ASSERT_TRUE(seen["geometry"].is_array()) << seen.dump();
  ASSERT_EQ(seen["geometry"].size(), titles.size());
  for (const auto& chart : seen["geometry"]) {
    const std::vector<double> plot = chart["plot"], legend = chart["legend"];
    const bool apart = legend[0] >= plot[0] + plot[2] || legend[0] + legend[2] <= plot[0] ||
                       legend[1] >= plot[1] + plot[3] || legend[1] + legend[3] <= plot[1];
    EXPECT_TRUE(apart) << chart.dump();
    EXPECT_GT(legend[2] * legend[3], 0) << chart.dump();
  }
}

TEST(ReportCommand, ARunDirectoryWithoutMetricsIsAOneLineError) {
  const auto result = run_command(testing::aspen_cli() + " report " + testing::scratch_dir());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("metrics.jsonl"), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

}  // namespace
}  // namespace aspen::cli
