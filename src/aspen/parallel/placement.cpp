#include "aspen/parallel/placement.h"

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

const char* name_of(PlacementMode mode) {
  return mode == PlacementMode::kColocated ? "colocated" : "disaggregated";
}

int Placement::world_size() const {
  const int train = train_dp * train_replica_size();
  return mode == PlacementMode::kColocated ? train
                                           : train + rollout_instances * rollout_instance_size();
}

void Placement::validate(int world, const std::string& where) const {
  check_input(train_dp >= 1, "must be >= 1", where + ".train.dp");
  check_input(train_tp >= 1, "must be >= 1", where + ".train.tp");
  check_input(train_ep >= 1, "must be >= 1", where + ".train.ep");
  check_input(train_pp >= 1, "must be >= 1", where + ".train.pp");
  // train.tp = 1: EP groups of data-parallel ranks (all-to-all). train.tp > 1: the EP
  // group is the TP group, whose ranks hold the same tokens (one all-reduce).
  check_input(train_tp > 1 || train_dp % train_ep == 0,
              "must divide train.dp " + std::to_string(train_dp) +
                  " (expert-parallel groups are made of data-parallel ranks)",
              where + ".train.ep");
  check_input(train_ep == 1 || train_tp == 1 || train_ep == train_tp,
              "must equal train.tp " + std::to_string(train_tp) +
                  " when both are above 1 (attention is split over the TP group and the "
                  "experts over the same ranks)",
              where + ".train.ep");
  check_input(train_ep == 1 || rollout_tp == 1,
              "expert-parallel trainers publish the full policy (experts gathered) to "
              "whole-model rollout instances: needs rollout.tp = 1",
              where + ".train.ep");
  check_input(rollout_instances >= 1, "must be >= 1", where + ".rollout.instances");
  check_input(rollout_tp >= 1, "must be >= 1", where + ".rollout.tp");
  check_input(rollout_ep >= 1, "must be >= 1", where + ".rollout.ep");
  check_input(rollout_ep == 1 || rollout_tp == 1,
              "an instance splits its experts by EP or its layers by TP, not both: needs "
              "rollout.tp = 1",
              where + ".rollout.ep");
  const int train = train_dp * train_replica_size();
  const int rollout = rollout_instances * rollout_instance_size();
  if (mode == PlacementMode::kColocated) {
    check_input(train == rollout,
                "colocated: train.dp x train.tp x train.pp = " + std::to_string(train) +
                    " must equal rollout.instances x rollout.tp x rollout.ep = " +
                    std::to_string(rollout),
                where);
    check_input(train_tp % rollout_tp == 0 || rollout_tp % train_tp == 0,
                "colocated: rollout.tp " + std::to_string(rollout_tp) +
                    " must divide or be a multiple of train.tp " + std::to_string(train_tp),
                where + ".rollout.tp");
  }
  check_input(world_size() == world,
              "needs " + std::to_string(world_size()) + " ranks but the job has WORLD_SIZE " +
                  std::to_string(world),
              where, "launch with aspen launch --nproc-per-node N to match the placement");
}

ReshardPlan Placement::reshard_plan(torch::ScalarType dtype) const {
  // With stages, each rank reshards its own stage's layers and the stage group
  // exchanges them: every rollout rank gets its shard of the whole model.
  return ReshardPlan{train_dp, train_tp, rollout_tp, dtype, train_pp};
}

RankRoles roles_of(const Placement& placement, int rank) {
  RankRoles roles;
  const int train = placement.train_dp * placement.train_replica_size();
  if (rank < train) {
    roles.trains = true;
    roles.train_tp_rank = rank % placement.train_tp;
    roles.train_pp_rank = (rank / placement.train_tp) % placement.train_pp;
    roles.train_dp_rank = rank / placement.train_replica_size();
  }
  if (placement.rollout_ep > 1) {
    // Expert-parallel instances: rollout_ep consecutive ranks each (after the
    // trainers when disaggregated).
    const int first = placement.mode == PlacementMode::kColocated ? 0 : train;
    if (rank >= first && rank < placement.world_size()) {
      const int q = rank - first;
      roles.serves_rollout = true;
      roles.rollout_instance = q / placement.rollout_ep;
      roles.rollout_tp_rank = 0;
      roles.rollout_ep_rank = q % placement.rollout_ep;
    }
    return roles;
  }
  if (placement.mode == PlacementMode::kColocated) {
    if (roles.trains) {
      const InferencePlacement inference =
          inference_placement(placement.reshard_plan(torch::kFloat), rank);
      roles.serves_rollout = true;
      roles.rollout_instance = inference.replica;
      roles.rollout_tp_rank = inference.tp_rank;
    }
  } else if (rank >= train && rank < placement.world_size()) {
    const int q = rank - train;
    roles.serves_rollout = true;
    roles.rollout_instance = q / placement.rollout_tp;
    roles.rollout_tp_rank = q % placement.rollout_tp;
  }
  return roles;
}

}  // namespace aspen::parallel
