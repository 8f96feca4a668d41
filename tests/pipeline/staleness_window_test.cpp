// The staleness rules shared by the iteration engine and the simulator, on a real dock
// controller: the admission bound with over-sampling's extra groups, the batch claim that
// waits for the window's stragglers, and the one that trains past them (over-sampling).
#include <gtest/gtest.h>

#include "aspen/dock/controller.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/staleness_window.h"

namespace aspen::pipeline {
namespace {

constexpr int64_t kN = 2;

// Allocates a group of kN rows at `version`; `scored`: its responses and scores are in,
// so the batch may take it.
void add_group(DockController& dock, int64_t group, int64_t version, bool scored) {
  std::vector<RowInfo> infos(kN);
  for (RowInfo& info : infos) {
    info.group_id = group;
    info.group_size = kN;
    info.version = version;
    info.tokens = 3;
  }
  const std::vector<RowId> rows = dock.allocate(infos, 0.0);
  dock.publish(rows, {rl_columns::kPrompt, rl_columns::kExample, rl_columns::kSampleIndex}, 0);
  if (!scored) return;
  dock.publish(rows,
               {rl_columns::kResponse, rl_columns::kRolloutLogprobs, rl_columns::kRolloutVersions},
               0, infos);
  ClaimOptions reward;
  reward.max_rows = kN;
  reward.groups = {group};
  const Claim claim = dock.claim(rl_consumers::kReward, reward);
  dock.publish(claim.row_ids(), {rl_columns::kScores, rl_columns::kVerifierScore}, 0);
  dock.ack(claim.lease);
}

std::vector<int64_t> groups_of(const Claim& claim) {
  std::vector<int64_t> groups;
  for (const ClaimedRow& row : claim.rows) {
    if (groups.empty() || groups.back() != row.info.group_id) groups.push_back(row.info.group_id);
  }
  return groups;
}

class StalenessWindowDock : public ::testing::Test {
 protected:
  StalenessWindowDock() { dock.register_warehouse(""); }
  DockController dock{make_rl_schema(RlSchemaOptions{})};
};

TEST(StalenessWindow, OverSamplingAdmitsItsExtraGroupsOnTopOfTheBound) {
  const ConsumerBacklog none;
  // Published version 1, eta 2, batches of 4 groups, 8 trained: (1 + 2 + 1) x 4 - 8.
  EXPECT_EQ(admissible_groups(1, 2, 4, 8, none, kN), 8);
  EXPECT_EQ(admissible_groups(1, 2, 4, 8, none, kN, 1), 9);
  TrainConfig config;
  config.rollout.prompts_per_iteration = 10;
  EXPECT_EQ(over_sample_groups(config), 0);
  config.pipeline.over_sample = 0.25;
  EXPECT_EQ(over_sample_groups(config), 3);  // ceil(2.5)
  config.pipeline.over_sample = 0.2;
  EXPECT_EQ(over_sample_groups(config), 2);  // exactly 2, not 3 from rounding
}

TEST_F(StalenessWindowDock, TheWindowWaitsForAStragglerThatOverSamplingTrainsPast) {
  add_group(dock, 0, 0, /*scored=*/false);  // version 0, still generating
  add_group(dock, 1, 1, true);
  add_group(dock, 2, 1, true);
  // Update 1 at eta 1 must take every group of version <= 0: group 0 is pending.
  EXPECT_TRUE(dock.claim(rl_consumers::kBatch, batch_claim_options(1, 1, 2, kN, true)).empty());
  // Over-sampling: the oldest two scored groups of version >= 0.
  const Claim batch =
      dock.claim(rl_consumers::kBatch, batch_claim_options(1, 1, 2, kN, true, true));
  EXPECT_EQ(groups_of(batch), (std::vector<int64_t>{1, 2}));
}

TEST_F(StalenessWindowDock, OverSamplingNeverTrainsARowOlderThanTheBound) {
  add_group(dock, 0, 0, true);
  add_group(dock, 1, 1, true);
  add_group(dock, 2, 2, true);
  // Update 2 at eta 1 trains versions >= 1 only.
  EXPECT_EQ(oldest_trainable_version(2, 1), 1);
  const Claim batch =
      dock.claim(rl_consumers::kBatch, batch_claim_options(2, 1, 2, kN, true, true));
  EXPECT_EQ(groups_of(batch), (std::vector<int64_t>{1, 2}));
}

TEST(StalenessWindow, AGroupIsAStragglerOnceItsAdmissionVersionFallsOutOfTheWindow) {
  // eta 1: a group admitted at version v trains by update v + 1.
  EXPECT_FALSE(is_straggler(1, 2, 1));  // update 2 may still take it
  EXPECT_TRUE(is_straggler(1, 3, 1));   // update 2 did not: it never will
  // Sync (eta 0): what update i did not take is a straggler at once.
  EXPECT_TRUE(is_straggler(4, 5, 0));
  EXPECT_FALSE(is_straggler(5, 5, 0));
}

}  // namespace
}  // namespace aspen::pipeline
