// The batch plan trainer 0 hands the other data-parallel trainers survives its one
// encoding field for field, and a damaged encoding is aspen's error, not a misread batch.
#include "aspen/pipeline/batch_plan.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

ClaimedRow row(RowId id, int64_t group, int64_t version, int64_t tokens) {
  ClaimedRow out;
  out.id = id;
  out.info.group_id = group;
  out.info.group_size = 2;
  out.info.version = version;
  out.info.tokens = tokens;
  out.locations = {0, 1};
  return out;
}

BatchPlan sample_plan() {
  BatchPlan plan;
  plan.trained.rows.consumer = "batch";
  plan.trained.rows.columns = {"prompt", "response"};
  plan.trained.rows.rows = {row(40, 7, 4, 12), row(41, 7, 4, 0), row(12, 3, 5, 7),
                            row(13, 3, 5, 9),  row(90, 11, 5, 1), row(91, 11, 6, 2)};
  plan.trained.rows.ranks = {{40, 41, 90, 91}, {12, 13}};
  plan.trained.scores = {1.0, 0.0, 0.5, -1e-300, 3.25, 1.0};
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
  ASSERT_EQ(back.trained.rows.rows.size(), plan.trained.rows.rows.size());
  for (size_t i = 0; i < plan.trained.rows.rows.size(); ++i) {
    const ClaimedRow& a = back.trained.rows.rows[i];
    const ClaimedRow& b = plan.trained.rows.rows[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.info.group_id, b.info.group_id);
    EXPECT_EQ(a.info.version, b.info.version);
    EXPECT_EQ(a.info.tokens, b.info.tokens);
    EXPECT_EQ(a.locations, b.locations);
  }
  EXPECT_EQ(back.trained.rows.columns, plan.trained.rows.columns);
  EXPECT_EQ(back.trained.rows.ranks, plan.trained.rows.ranks);
  EXPECT_EQ(back.trained.scores, plan.trained.scores);  // bit for bit
  EXPECT_EQ(back.groups(), (std::vector<int64_t>{7, 3, 11}));
  EXPECT_EQ(back.versions(), (std::vector<int64_t>{4, 4, 5, 5, 5, 6}));
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
  EXPECT_TRUE(back.groups().empty());
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
}  // namespace aspen::pipeline
