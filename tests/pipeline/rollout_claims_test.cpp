// The rollout instances' claim rule (rollout_claims.h), which the real instances and
// the simulator share, on a scripted instance and dock: room, own units first, work
// stealing only when run dry, and what counts as started and as stolen.
#include "aspen/pipeline/rollout_claims.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace aspen::pipeline {
namespace {

constexpr int kInstance = 1;

QueueState queue_of(int64_t running, int64_t waiting) {
  QueueState state;
  state.running = running;
  state.waiting = waiting;
  return state;
}

// One instance with room for `room` more units, and a dock holding dispatched units
// (by their targets, oldest first) that answers claims as the controller does: a
// target claims only its own units, -1 any unit.
struct ScriptedInstance {
  int64_t room = 0;
  bool idle = true;
  bool refuse = false;  // the engine refuses every unit
  std::deque<int> dock;
  std::vector<ClaimOptions> asked;  // every claim, in order
  std::vector<int> started;         // the targets of the units started

  RolloutClaimer claimer() {
    RolloutClaimer c;
    c.has_room = [this] { return room > 0; };
    c.idle = [this] { return idle; };
    c.claim = [this](const ClaimOptions& options) {
      asked.push_back(options);
      Claim claim;
      for (auto it = dock.begin(); it != dock.end(); ++it) {
        if (options.target != -1 && *it != options.target) continue;
        ClaimedRow row;
        row.info.target = *it;
        claim.lease = static_cast<int64_t>(asked.size());
        claim.rows.push_back(row);
        dock.erase(it);
        break;
      }
      return claim;
    };
    c.start = [this](Claim claim) {
      if (refuse) return false;
      started.push_back(claim.rows.front().info.target);
      --room;
      return true;
    };
    return c;
  }
};

// Whole groups of 4, weights at version 7.
ClaimOptions group_claims() { return rollout_claim_options(4, 4, 7, 10.0); }

TEST(RolloutClaimRoom, AnEmptyEngineTakesAUnitWhateverItsSize) {
  EXPECT_TRUE(has_room_for_unit(queue_of(0, 0), /*chunk=*/100, /*max_num_seqs=*/8));
  EXPECT_TRUE(has_room_for_unit(queue_of(2, 2), 4, 8));  // exactly full after the unit
  EXPECT_FALSE(has_room_for_unit(queue_of(2, 3), 4, 8));
  EXPECT_FALSE(has_room_for_unit(queue_of(1, 0), 100, 8));
}

TEST(RolloutClaimOptions, OneUnitAtMostTheLoadedVersionWholeGroupsOnlyForWholeGroupChunks) {
  const ClaimOptions whole = rollout_claim_options(/*chunk=*/4, /*n=*/4, /*max_version=*/7, 10.0);
  EXPECT_EQ(whole.max_rows, 4);
  EXPECT_EQ(whole.min_rows, 1);
  EXPECT_TRUE(whole.whole_groups);
  EXPECT_EQ(whole.max_version, 7);
  EXPECT_DOUBLE_EQ(whole.lease_s, 10.0);
  const ClaimOptions chunked = rollout_claim_options(/*chunk=*/2, /*n=*/4, 7, 10.0);
  EXPECT_EQ(chunked.max_rows, 2);
  EXPECT_FALSE(chunked.whole_groups);
}

TEST(RolloutClaimUnits, ClaimsItsOwnUnitsWhileItHasRoomAndStealsNone) {
  ScriptedInstance instance;
  instance.room = 2;
  instance.dock = {0, kInstance, kInstance, kInstance};
  const RolloutClaimRound round =
      claim_rollout_units(kInstance, group_claims(), /*steal_wait_s=*/0.5, instance.claimer());
  EXPECT_EQ(round.started, 2);
  EXPECT_EQ(round.stolen, 0);
  EXPECT_EQ(instance.started, (std::vector<int>{kInstance, kInstance}));
  ASSERT_EQ(instance.asked.size(), 2u);  // no claim once the room is gone
  for (const ClaimOptions& asked : instance.asked) {
    EXPECT_EQ(asked.target, kInstance);
    EXPECT_DOUBLE_EQ(asked.timeout_s, 0.0);  // an own claim never waits
    EXPECT_EQ(asked.max_version, 7);
  }
  EXPECT_EQ(instance.dock, (std::deque<int>{0, kInstance}));
}

TEST(RolloutClaimUnits, AnIdleInstanceWithNothingOfItsOwnStealsOneUnitWaitingForIt) {
  ScriptedInstance instance;
  instance.room = 3;
  instance.dock = {0, 2, 0};
  const RolloutClaimRound round =
      claim_rollout_units(kInstance, group_claims(), /*steal_wait_s=*/0.5, instance.claimer());
  // One unit stolen; having started one this round, it leaves the rest to their targets.
  EXPECT_EQ(round.started, 1);
  EXPECT_EQ(round.stolen, 1);
  EXPECT_EQ(instance.started, (std::vector<int>{0}));
  ASSERT_EQ(instance.asked.size(), 3u);  // own (empty), steal, own (empty): stop
  EXPECT_EQ(instance.asked[1].target, -1);
  EXPECT_DOUBLE_EQ(instance.asked[1].timeout_s, 0.5);
  EXPECT_EQ(instance.asked[2].target, kInstance);
  EXPECT_EQ(instance.dock, (std::deque<int>{2, 0}));
}

TEST(RolloutClaimUnits, ABusyInstanceNeverSteals) {
  ScriptedInstance instance;
  instance.room = 3;
  instance.idle = false;  // its engine still has samples to finish
  instance.dock = {0, 2};
  const RolloutClaimRound round =
      claim_rollout_units(kInstance, group_claims(), 0.5, instance.claimer());
  EXPECT_EQ(round.started, 0);
  ASSERT_EQ(instance.asked.size(), 1u);
  EXPECT_EQ(instance.asked[0].target, kInstance);
}

TEST(RolloutClaimUnits, AnInstanceThatStartedAUnitOfItsOwnDoesNotStealInTheSameRound) {
  ScriptedInstance instance;
  instance.room = 3;
  instance.dock = {kInstance, 0, 0};
  const RolloutClaimRound round =
      claim_rollout_units(kInstance, group_claims(), 0.5, instance.claimer());
  EXPECT_EQ(round.started, 1);
  EXPECT_EQ(round.stolen, 0);
  for (const ClaimOptions& asked : instance.asked) EXPECT_EQ(asked.target, kInstance);
}

TEST(RolloutClaimUnits, AUnitOfItsOwnTakenByAnAnyTargetClaimIsNotCountedStolen) {
  ScriptedInstance instance;
  instance.room = 1;
  instance.dock = {kInstance};
  RolloutClaimer claimer = instance.claimer();
  // The own claim misses it (e.g. it was dispatched while the claim ran); the steal finds it.
  bool first = true;
  const auto dock_claim = claimer.claim;
  claimer.claim = [&](const ClaimOptions& options) {
    if (first) {
      first = false;
      return Claim{};
    }
    return dock_claim(options);
  };
  const RolloutClaimRound round = claim_rollout_units(kInstance, group_claims(), 0.5, claimer);
  EXPECT_EQ(round.started, 1);
  EXPECT_EQ(round.stolen, 0);
}

TEST(RolloutClaimUnits, AUnitTheEngineRefusesIsNotStartedAndTheRoundGoesOn) {
  ScriptedInstance instance;
  instance.room = 1;
  instance.refuse = true;
  instance.dock = {kInstance, 0};
  const RolloutClaimRound round =
      claim_rollout_units(kInstance, group_claims(), 0.5, instance.claimer());
  // Both refused: nothing started, so the instance stayed dry and stole the second.
  EXPECT_EQ(round.started, 0);
  EXPECT_EQ(round.stolen, 1);
  EXPECT_TRUE(instance.dock.empty());
}

}  // namespace
}  // namespace aspen::pipeline
