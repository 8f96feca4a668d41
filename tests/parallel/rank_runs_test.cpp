// The multi-rank comparison's weight check (rank_runs.h): it allows a few AdamW rounding
// flips and nothing that looks like a wrong update.
#include "rank_runs.h"

#include <gtest/gtest-spi.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace aspen::testing {
namespace {

// 20,000 elements in two tensors: the default share (1 in 10,000) allows 2 flips.
std::map<std::string, torch::Tensor> weights() {
  return {{"a", torch::linspace(-1.0, 1.0, 10'000)}, {"b", torch::linspace(0.5, 2.0, 10'000)}};
}

std::map<std::string, torch::Tensor> moved(std::map<std::string, torch::Tensor> w,
                                           const std::string& name, int64_t count, double by) {
  w[name] = w[name].clone();
  w[name].narrow(0, 0, count).add_(by);
  return w;
}

TEST(WeightComparison, EqualWeightsPassAndTwoFlipsWithinTheBoundPass) {
  expect_weights_alike(weights(), weights(), 1e-4, {.max_diff = 6e-3});
  expect_weights_alike(weights(), moved(weights(), "a", 2, 2e-3), 1e-4, {.max_diff = 6e-3});
}

TEST(WeightComparison, MoreFlipsThanTheShareFail) {
  EXPECT_NONFATAL_FAILURE(
      expect_weights_alike(weights(), moved(weights(), "b", 3, 2e-3), 1e-4, {.max_diff = 6e-3}),
      "3 of 20000 weight elements differ by more than");
}

TEST(WeightComparison, AFlipBeyondTheStepBoundFails) {
  EXPECT_NONFATAL_FAILURE(
      expect_weights_alike(weights(), moved(weights(), "a", 1, 7e-3), 1e-4, {.max_diff = 6e-3}),
      "a: max |diff|");
}

TEST(WeightComparison, AWrongUpdateOfEveryElementFails) {
  EXPECT_NONFATAL_FAILURE(expect_weights_alike(weights(), moved(weights(), "b", 10'000, 1e-3),
                                               1e-4, {.max_diff = 6e-3}),
                          "10000 of 20000");
}

TEST(WeightComparison, ANanCountsAsBeyond) {
  EXPECT_NONFATAL_FAILURE(
      expect_weights_alike(weights(),
                           moved(weights(), "a", 1, std::numeric_limits<double>::quiet_NaN()),
                           1e-4, {.max_diff = 6e-3}),
      "beyond");
}

TEST(WeightComparison, NoFlipsAllowedMeansEveryElementWithinTheTolerance) {
  EXPECT_NONFATAL_FAILURE(expect_weights_alike(weights(), moved(weights(), "a", 1, 2e-3), 1e-4,
                                               {.max_fraction = 0.0, .max_diff = 6e-3}),
                          "1 of 20000");
}

}  // namespace
}  // namespace aspen::testing
