// A metric that is not a finite number never reaches metrics.jsonl or summary.json as
// JSON null: it is an error naming the key path and where it was to be written.
#include <gtest/gtest.h>

#include <limits>

#include "aspen/report/finite_metrics.h"
#include "aspen/util/error.h"

namespace aspen::report {
namespace {

TEST(FiniteMetrics, FiniteLinesPass) {
  const nlohmann::json line = {{"reward_mean", 1e300}, {"rows", 16}, {"phase", "rl"},
                               {"bubbles", {{"skewness", 0.0}}}, {"versions", {1, 2}}};
  EXPECT_NO_THROW(check_finite_metrics(line, "metrics.jsonl: iteration 1"));
}

TEST(FiniteMetrics, ANonFiniteNumberIsAnErrorNamingItsKeyPathAndWhere) {
  const double inf = std::numeric_limits<double>::infinity();
  const struct {
    nlohmann::json line;
    std::string path;
  } cases[] = {
      {{{"reward_mean", inf}}, "reward_mean"},
      {{{"bubbles", {{"skewness", std::nan("")}}}}, "bubbles.skewness"},
      {{{"stage_seconds", {{"update", -inf}}}}, "stage_seconds.update"},
      {{{"per_group", {1.0, std::nan("")}}}, "per_group[1]"},
  };
  for (const auto& c : cases) {
    try {
      check_finite_metrics(c.line, "metrics.jsonl: iteration 3");
      FAIL() << "accepted " << c.path;
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), "metrics.jsonl: iteration 3");
      EXPECT_NE(e.problem().find("metric " + c.path + " is"), std::string::npos) << e.what();
      EXPECT_NE(e.problem().find("null"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace aspen::report
