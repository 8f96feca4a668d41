#include "aspen/algo/dapo.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::ivec;

TEST(DynamicSampling, KeepsOnlyGroupsWhoseRewardsDiffer) {
  // group 10: [1, 1] equal -> drop; 20: [0, 1] -> keep; 30: [0.5, 0.5] -> drop;
  // 40: [0.3] a single row -> drop.
  const std::vector<double> rewards = {1, 0, 1, 0.5, 0.5, 0.3, 1};
  const std::vector<int64_t> groups = {10, 20, 10, 30, 30, 40, 20};
  EXPECT_EQ(informative_groups(groups, rewards), (std::set<int64_t>{20}));
}

TEST(DynamicSampling, EqualRewardsThatWouldRoundInTheMeanAreStillDropped) {
  // Three rewards of 0.1: their mean is 0.10000000000000002, so a std > 0 test can keep them.
  EXPECT_TRUE(informative_groups({1, 1, 1}, {0.1, 0.1, 0.1}).empty());
  EXPECT_THROW(informative_groups({1}, {1, 2}), Error);
}

TEST(DynamicSampling, ARewardDifferenceOfOneUlpIsInformative) {
  EXPECT_EQ(informative_groups({5, 5}, {0.1, std::nextafter(0.1, 1.0)}), (std::set<int64_t>{5}));
}

TEST(OverlongPenalty, ZeroThenLinearRampThenMinusOne) {
  // L_max 20, L_cache 4 -> ramp starts after 16: R = (16 - L)/4.
  // L = 10 -> 0; 16 -> 0; 17 -> -0.25; 18 -> -0.5; 20 -> -1; 21 (beyond max) -> -1.
  OverlongBuffer b{20, 4, 1.0};
  expect_values(overlong_penalty(ivec({10, 16, 17, 18, 20, 21}), b), {0, 0, -0.25, -0.5, -1, -1},
                1e-7);
  b.penalty_factor = 0.5;
  expect_values(overlong_penalty(ivec({17, 25}), b), {-0.125, -0.5}, 1e-7);
}

TEST(OverlongPenalty, NoBufferIsAStepAtMaxAndBadSettingsThrow) {
  OverlongBuffer b{20, 0, 1.0};
  expect_values(overlong_penalty(ivec({20, 21}), b), {0, -1});
  EXPECT_EQ(overlong_penalty(ivec({20}), b).scalar_type(), torch::kFloat);
  EXPECT_THROW(overlong_penalty(ivec({1}), OverlongBuffer{20, 21, 1.0}), Error);
  EXPECT_THROW(overlong_penalty(ivec({1}), OverlongBuffer{0, 0, 1.0}), Error);
  EXPECT_THROW(overlong_penalty(dvec({1}), b), Error);
}

}  // namespace
}  // namespace aspen::algo
