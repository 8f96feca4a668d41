#include "aspen/parallel/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

TEST(Placement, ColocatedRanksTrainAndServeTheResharderLayout) {
  Placement p{PlacementMode::kColocated, 2, 2, 4,
              1};  // DP2 x TP2 training, 4 TP1 rollout instances
  p.validate(4, "placement");
  std::set<int> instances;
  for (int rank = 0; rank < 4; ++rank) {
    const RankRoles roles = roles_of(p, rank);
    EXPECT_TRUE(roles.trains && roles.serves_rollout);
    EXPECT_EQ(roles.train_tp_rank, rank % 2);
    EXPECT_EQ(roles.train_dp_rank, rank / 2);
    EXPECT_EQ(roles.rollout_tp_rank, 0);
    instances.insert(roles.rollout_instance);
  }
  EXPECT_EQ(instances.size(), 4u);
}

TEST(Placement, DisaggregatedRolloutRanksFollowTheTrainers) {
  Placement p{PlacementMode::kDisaggregated, 2, 1, 1, 2};  // 2 trainers, one TP2 rollout instance
  p.validate(4, "placement");
  EXPECT_TRUE(roles_of(p, 1).trains);
  EXPECT_FALSE(roles_of(p, 1).serves_rollout);
  const RankRoles r3 = roles_of(p, 3);
  EXPECT_FALSE(r3.trains);
  EXPECT_TRUE(r3.serves_rollout);
  EXPECT_EQ(r3.rollout_instance, 0);
  EXPECT_EQ(r3.rollout_tp_rank, 1);
}

TEST(Placement, WrongWorldSizeNamesThePlacement) {
  Placement p{PlacementMode::kDisaggregated, 2, 1, 1, 2};
  try {
    p.validate(2, "run.yaml: placement");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 ranks but the job has WORLD_SIZE 2"),
              std::string::npos)
        << e.what();
  }
  Placement bad{PlacementMode::kColocated, 1, 2, 1, 1};
  EXPECT_THROW(bad.validate(2, "placement"), Error);  // 2 training ranks, 1 rollout rank
  // An unknown mode cannot reach a Placement: the config refuses it when parsed
  // (TrainConfig.ErrorsNameTheKeyPath, placement.mode: shared).
}

// Expert parallelism sits inside the data-parallel trainers (train.ep divides train.dp)
// or spans the TP group (train.ep = train.tp), and TP rollout instances do not take the
// trainers' shards.
TEST(Placement, ExpertParallelismMustFitTheDataParallelTrainers) {
  Placement p{PlacementMode::kColocated, 4, 1, 4, 1};
  p.train_ep = 2;
  p.validate(4, "placement");
  const auto error_of = [](Placement q) {
    try {
      q.validate(q.world_size(), "placement");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Placement three = p;
  three.train_ep = 3;
  EXPECT_NE(error_of(three).find("placement.train.ep: must divide train.dp 4"), std::string::npos)
      << error_of(three);
  // With TP, the EP group is the TP group: train.ep equals train.tp (and need not
  // divide train.dp).
  Placement with_tp{PlacementMode::kColocated, 3, 2, 6, 1};
  with_tp.train_ep = 2;
  with_tp.validate(6, "placement");
  with_tp.train_ep = 3;
  EXPECT_NE(error_of(with_tp).find("placement.train.ep: must equal train.tp 2"), std::string::npos)
      << error_of(with_tp);
  Placement rollout_tp{PlacementMode::kColocated, 4, 1, 2, 2};
  rollout_tp.train_ep = 2;
  EXPECT_NE(error_of(rollout_tp).find("needs rollout.tp = 1"), std::string::npos)
      << error_of(rollout_tp);
  Placement zero = p;
  zero.train_ep = 0;
  EXPECT_NE(error_of(zero).find("placement.train.ep: must be >= 1"), std::string::npos);

  // Expert-parallel rollout instances: rollout.ep consecutive ranks each.
  Placement rollout_ep{PlacementMode::kDisaggregated, 2, 1, 2, 1};
  rollout_ep.rollout_ep = 2;
  EXPECT_EQ(rollout_ep.world_size(), 6);
  rollout_ep.validate(6, "placement");
  const RankRoles r5 = roles_of(rollout_ep, 5);
  EXPECT_TRUE(r5.serves_rollout);
  EXPECT_EQ(r5.rollout_instance, 1);
  EXPECT_EQ(r5.rollout_ep_rank, 1);
  Placement both = rollout_ep;
  both.rollout_tp = 2;
  EXPECT_NE(error_of(both).find("placement.rollout.ep"), std::string::npos) << error_of(both);
  Placement colocated{PlacementMode::kColocated, 2, 1, 2, 1};
  colocated.rollout_ep = 2;
  EXPECT_NE(error_of(colocated).find("rollout.instances x rollout.tp x rollout.ep = 4"),
            std::string::npos)
      << error_of(colocated);
}

}  // namespace
}  // namespace aspen::parallel
