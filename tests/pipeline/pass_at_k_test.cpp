// The unbiased pass@k estimator (pipeline/pass_at_k.h) against hand values and the
// binomial form computed with log-gamma.
#include "aspen/pipeline/pass_at_k.h"

#include <gtest/gtest.h>

#include <cmath>

#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

double log_choose(int64_t n, int64_t k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

TEST(PassAtK, HandValues) {
  EXPECT_DOUBLE_EQ(pass_at_k(4, 1, 1), 0.25);
  EXPECT_DOUBLE_EQ(pass_at_k(4, 1, 2), 0.5);  // 1 - C(3,2)/C(4,2) = 1 - 3/6
  EXPECT_DOUBLE_EQ(pass_at_k(4, 0, 4), 0.0);
  EXPECT_DOUBLE_EQ(pass_at_k(4, 4, 1), 1.0);
  EXPECT_DOUBLE_EQ(pass_at_k(4, 2, 3), 1.0);  // any 3 of 4 hold one of the 2 correct
  EXPECT_NEAR(pass_at_k(10, 3, 1), 0.3, 1e-15);
}

TEST(PassAtK, MatchesTheBinomialFormForLargeN) {
  for (const auto& [n, c, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1000, 10, 100}, {200, 50, 7}, {64, 1, 64 - 1}, {5000, 4999, 2}}) {
    const double want = n - c < k ? 1.0 : 1.0 - std::exp(log_choose(n - c, k) - log_choose(n, k));
    EXPECT_NEAR(pass_at_k(n, c, k), want, 1e-9) << n << " " << c << " " << k;
  }
}

TEST(PassAtK, RefusesImpossibleCounts) {
  EXPECT_THROW(pass_at_k(4, 5, 1), Error);
  EXPECT_THROW(pass_at_k(4, 1, 0), Error);
  EXPECT_THROW(pass_at_k(4, 1, 5), Error);
  EXPECT_THROW(pass_at_k(0, 0, 1), Error);
}

}  // namespace
}  // namespace aspen::pipeline
