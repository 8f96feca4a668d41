// The batch plan trainer 0 hands the other data-parallel trainers survives its one
// encoding field for field, and a damaged encoding is aspen's error, not a misread batch.
#include "aspen/pipeline/batch_plan.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen {
namespace {

BatchPlan sample_plan() {
  BatchPlan plan;
  plan.groups = {7, 3, 11};
  plan.trained_versions = {4, 4, 5, 5, 5, 6};
  plan.sampling_rounds = 2;
  plan.rewards.scores = {1.0, 0.0, 0.5, -1e-300, 3.25, 1.0, 0.0, 1.0};
  plan.rewards.lengths = {12, 0, 7, 9, 1, 2, 3, 4};
  plan.rewards.versions = {4, 4, 5, 5, 5, 6, 6, 6};
  plan.rewards.row_groups = {7, 7, 3, 3, 11, 11, 20, 20};
  plan.rewards.groups = {3, 7, 11, 20};
  plan.rewards.informative = {3, 7, 11};
  return plan;
}

TEST(BatchPlan, RoundTripsEveryField) {
  const BatchPlan plan = sample_plan();
  const BatchPlan back = decode_batch_plan(encode_batch_plan(plan));
  EXPECT_EQ(back.groups, plan.groups);
  EXPECT_EQ(back.trained_versions, plan.trained_versions);
  EXPECT_EQ(back.sampling_rounds, plan.sampling_rounds);
  EXPECT_EQ(back.rewards.scores, plan.rewards.scores);  // bit for bit
  EXPECT_EQ(back.rewards.lengths, plan.rewards.lengths);
  EXPECT_EQ(back.rewards.versions, plan.rewards.versions);
  EXPECT_EQ(back.rewards.row_groups, plan.rewards.row_groups);
  EXPECT_EQ(back.rewards.groups, plan.rewards.groups);
  EXPECT_EQ(back.rewards.informative, plan.rewards.informative);
}

TEST(BatchPlan, AnEmptyPlanRoundTrips) {  // every group dropped by dynamic sampling
  const BatchPlan back = decode_batch_plan(encode_batch_plan(BatchPlan{}));
  EXPECT_TRUE(back.groups.empty());
  EXPECT_TRUE(back.rewards.groups.empty());
  EXPECT_EQ(back.sampling_rounds, 0);
}

TEST(BatchPlan, ATruncatedOrPaddedEncodingIsRefused) {
  const std::string bytes = encode_batch_plan(sample_plan());
  for (size_t cut : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_THROW(decode_batch_plan(bytes.substr(0, cut)), Error) << cut;
  }
  EXPECT_THROW(decode_batch_plan(bytes + "x"), Error);
}

}  // namespace
}  // namespace aspen
