// The RL console report (report/console_progress.h): plain lines with the iteration
// out of the total, the rate and the ETA when not on a terminal; one live line redrawn
// in place on a terminal, kept at evaluations and at the end.
#include "aspen/report/console_progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace aspen::report {
namespace {

nlohmann::json iteration_line(double seconds, bool eval = false) {
  nlohmann::json line = {{"reward_mean", 0.5},       {"accuracy", 0.25}, {"approx_kl", 0.001},
                         {"response_length_mean", 7.0}, {"clip_frac", 0.0}, {"seconds", seconds}};
  if (eval) line["eval_accuracy"] = 0.875;
  return line;
}

TEST(ConsoleProgress, PlainLinesCarryTheTotalTheRateAndTheEta) {
  std::ostringstream out;
  ConsoleProgress progress(out, /*terminal=*/false, /*total=*/10, /*first=*/0);
  progress.report(1, iteration_line(2.0));
  progress.report(2, iteration_line(4.0, /*eval=*/true));
  progress.finish();
  const std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(text.find('\033'), std::string::npos);
  EXPECT_NE(text.find("iter  1/10"), std::string::npos) << text;
  EXPECT_NE(text.find("(2.0 s/it, eta 18s)\n"), std::string::npos) << text;
  // Mean of 2 s and 4 s, 8 iterations left.
  EXPECT_NE(text.find("eval_acc 0.875  (3.0 s/it, eta 24s)\n"), std::string::npos) << text;
}

TEST(ConsoleProgress, ATerminalKeepsOneLiveLineAndKeepsEvaluations) {
  std::ostringstream out;
  ConsoleProgress progress(out, /*terminal=*/true, /*total=*/3, /*first=*/0);
  progress.report(1, iteration_line(1.0));
  EXPECT_EQ(out.str().back(), ')');  // open: the next report redraws it
  progress.report(2, iteration_line(1.0, /*eval=*/true));
  progress.report(3, iteration_line(1.0));
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("\r\033[Kiter 1/3", 0), 0u) << text;
  EXPECT_NE(text.find(")\r\033[Kiter 2/3"), std::string::npos) << text;  // redrawn in place
  EXPECT_NE(text.find("eta 1s)\n\r\033[Kiter 3/3"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');  // the last iteration stays
}

TEST(ConsoleProgress, AResumedRunEstimatesFromItsOwnIterations) {
  std::ostringstream out;
  ConsoleProgress progress(out, false, /*total=*/100, /*first=*/90);
  progress.report(91, iteration_line(5.0));
  EXPECT_NE(out.str().find("iter  91/100"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("(5.0 s/it, eta 45s)"), std::string::npos) << out.str();
}

TEST(ConsoleProgress, DurationsReadLikeAClock) {
  EXPECT_EQ(ConsoleProgress::duration(45.2), "45s");
  EXPECT_EQ(ConsoleProgress::duration(187), "3m07s");
  EXPECT_EQ(ConsoleProgress::duration(7500), "2h05m");
  EXPECT_EQ(ConsoleProgress::duration(-3), "0s");
}

}  // namespace
}  // namespace aspen::report
