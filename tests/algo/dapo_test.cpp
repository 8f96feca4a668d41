#include "aspen/algo/dapo.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::ivec;

TEST(DynamicSampling, KeepsOnlyGroupsWhoseRewardsDiffer) {
  // group 10: [1, 1] equal -> drop; 20: [0, 1] -> keep; 30: [0.5, 0.5] -> drop;
  // 40: [0.3] singleton -> drop unless keep_singletons.
  torch::Tensor rewards = dvec({1, 0, 1, 0.5, 0.5, 0.3, 1});
  torch::Tensor groups = ivec({10, 20, 10, 30, 30, 40, 20});
  GroupFilter f = filter_informative_groups(rewards, groups);
  EXPECT_TRUE(
      torch::equal(f.keep_rows, torch::tensor({false, true, false, false, false, false, true})));
  EXPECT_TRUE(torch::equal(f.kept_groups, ivec({20})));
  GroupFilter s = filter_informative_groups(rewards, groups, /*keep_singletons=*/true);
  EXPECT_TRUE(torch::equal(s.kept_groups, ivec({20, 40})));
  EXPECT_TRUE(s.keep_rows[5].item<bool>());
}

TEST(DynamicSampling, EqualRewardsThatWouldRoundInTheMeanAreStillDropped) {
  // Three rewards of 0.1: their mean is 0.10000000000000002, so a std > 0 test can keep them.
  GroupFilter f = filter_informative_groups(dvec({0.1, 0.1, 0.1}), ivec({1, 1, 1}));
  EXPECT_EQ(f.kept_groups.numel(), 0);
  EXPECT_THROW(filter_informative_groups(dvec({1, 2}), ivec({1})), Error);
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
}  // namespace aspen
