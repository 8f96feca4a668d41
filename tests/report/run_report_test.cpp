// render_run_report: every value of metrics.jsonl that a chart shows is in that chart,
// wherever the file puts it: the eval before RL on its own "phase": "eval" line, the
// periodic evals as eval_accuracy on RL iteration lines (rl_run.cpp writes both). The
// page counts the evaluations the same way.
#include "aspen/report/run_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/report_charts.h"

namespace aspen::report {
namespace {

namespace fs = std::filesystem;

std::string scratch_run_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("aspen_run_report_" + std::string(info->name()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The lines of a 4-iteration run with logging.eval_every=2, as rl_run.cpp writes them.
const char* const kMetrics =
    R"({"phase":"sft","step":20,"nll":4.3,"grad_norm":2.2,"lr":0.0002,"seconds":0.04}
{"phase":"eval","iteration":0,"eval_accuracy":0.125}
{"phase":"rl","iteration":1,"reward_mean":0.1,"accuracy":0.1,"grad_norm":0.5,"bubbles":{"rollout_idle":0.9,"trainer_idle":0.7,"staleness_histogram":{"0":16}},"stage_seconds":{"update":0.004,"wait":0.02}}
{"phase":"rl","iteration":2,"reward_mean":0.2,"accuracy":0.2,"grad_norm":0.25,"eval_accuracy":0.3125,"bubbles":{"rollout_idle":0.8,"trainer_idle":0.6},"stage_seconds":{"update":0.003,"wait":0.01}}
{"phase":"rl","iteration":3,"reward_mean":0.3,"accuracy":0.3,"grad_norm":0.125,"bubbles":{"rollout_idle":0.7,"trainer_idle":0.5,"skewness":0.25},"stage_seconds":{"update":0.002,"wait":0.03}}
{"phase":"rl","iteration":4,"reward_mean":0.4,"accuracy":0.4,"grad_norm":0.0625,"eval_accuracy":0.5,"bubbles":{"rollout_idle":0.6,"trainer_idle":0.4},"stage_seconds":{"update":0.001,"wait":0.04}}
)";

TEST(RunReport, ChartsEveryEvalWhetherOnItsOwnLineOrOnAnIterationLine) {
  const std::string dir = scratch_run_dir();
  std::ofstream(dir + "/metrics.jsonl") << kMetrics;
  const std::string html = render_run_report(dir);

  EXPECT_NE(html.find("4 RL iterations, 3 evaluations, 1 SFT log lines"), std::string::npos);
  const auto charts = testing::report_charts(html);
  const auto accuracy = std::find_if(charts.begin(), charts.end(),
                                     [](const auto& chart) { return chart.title == "Accuracy"; });
  ASSERT_NE(accuracy, charts.end());
  ASSERT_EQ(accuracy->series.size(), 2u);
  EXPECT_EQ(accuracy->series[1].name, "eval");
  EXPECT_EQ(accuracy->series[1].points, (testing::ChartPoints{{0, 0.125}, {2, 0.3125}, {4, 0.5}}));
}

TEST(RunReport, EveryChartHoldsEveryValueOfItsSeriesInMetricsJsonl) {
  const std::string dir = scratch_run_dir();
  std::ofstream(dir + "/metrics.jsonl") << kMetrics;
  const auto charted = testing::expect_charts_hold_every_metrics_value(
      testing::report_charts(render_run_report(dir)),
      testing::metrics_lines(dir + "/metrics.jsonl"));
  for (const char* key : {"reward_mean", "accuracy", "eval_accuracy", "grad_norm",
                          "bubbles/rollout_idle", "bubbles/trainer_idle", "bubbles/skewness",
                          "stage_seconds/update", "stage_seconds/wait", "nll"}) {
    EXPECT_NE(std::find(charted.begin(), charted.end(), key), charted.end()) << key;
  }
}

// A multi-turn run's lines (rollout.environment): turns, tool calls, tool errors, tool
// wait and the tool_wait bubble are charted, every value of them.
TEST(RunReport, ChartsTheTrajectoryMetricsOfAMultiTurnRun) {
  const std::string dir = scratch_run_dir();
  std::ofstream(dir + "/metrics.jsonl")
      << R"({"phase":"rl","iteration":1,"reward_mean":0.1,"turns_mean":1.5,"tool_calls_mean":0.5,"tool_errors_mean":0.125,"tool_wait_s_mean":0.25,"bubbles":{"tool_wait":0.2}}
{"phase":"rl","iteration":2,"reward_mean":0.2,"turns_mean":1.75,"tool_calls_mean":0.75,"tool_errors_mean":0.0625,"tool_wait_s_mean":0.5,"eval_tool_calls_mean":1.0,"bubbles":{"tool_wait":0.1}}
)";
  const auto charted = testing::expect_charts_hold_every_metrics_value(
      testing::report_charts(render_run_report(dir)),
      testing::metrics_lines(dir + "/metrics.jsonl"));
  for (const char* key : {"turns_mean", "tool_calls_mean", "tool_errors_mean", "tool_wait_s_mean",
                          "eval_tool_calls_mean", "bubbles/tool_wait"}) {
    EXPECT_NE(std::find(charted.begin(), charted.end(), key), charted.end()) << key;
  }
}

}  // namespace
}  // namespace aspen::report
