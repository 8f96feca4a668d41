// `aspen report`: the HTML report of a real (tiny) `aspen train` run, rendered by
// headless Chromium (tools/python/report_render_check.py): every chart of the metrics
// the run logged is there, the series' lines are drawn (their palette colours cover
// pixels of the screenshot), and the page logs nothing to the console. A run directory
// without metrics is refused with a one-line error naming the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/oracles.h"
#include "support/tiny_run_overrides.h"

namespace aspen {
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
}

TEST(ReportCommand, ARunDirectoryWithoutMetricsIsAOneLineError) {
  const auto result = run_command(testing::aspen_cli() + " report " + testing::scratch_dir());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("metrics.jsonl"), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

}  // namespace
}  // namespace aspen
