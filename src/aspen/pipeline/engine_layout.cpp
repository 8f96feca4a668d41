#include "aspen/pipeline/engine_layout.h"

#include <algorithm>

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

bool instances_take_resharded_shards(const TrainConfig& config, int world_size) {
  return world_size > 1 && config.placement.mode == PlacementMode::kColocated &&
         config.placement.rollout_tp > 1;
}

EngineLayout engine_layout(const TrainConfig& config, int rank, int world_size) {
  EngineLayout layout;
  layout.rank = rank;
  const Placement& p = config.placement;
  if (world_size == 1) {
    layout.instances = static_cast<int>(config.pipeline.instances);
    for (int i = 0; i < layout.instances; ++i) {
      layout.instances_here.push_back(i);
      layout.instance_ranks.push_back({0});
    }
    return layout;
  }
  layout.instances = p.rollout_instances;
  layout.train_tp = p.train_tp;
  layout.train_pp = p.train_pp;
  layout.trainers =
      p.mode == PlacementMode::kColocated ? world_size : p.train_dp * p.train_replica_size();
  // Instance i is rollout.tp ranks: consecutive after the trainers disaggregated,
  // the inference layout's replica i colocated; its first rank leads.
  const int first = p.mode == PlacementMode::kColocated ? 0 : layout.trainers;
  std::vector<std::vector<int>> colocated(static_cast<size_t>(layout.instances),
                                          std::vector<int>(static_cast<size_t>(p.rollout_tp)));
  if (instances_take_resharded_shards(config, world_size)) {
    // fp32: the rollout engines compute in fp32.
    const ReshardPlan plan = p.reshard_plan(torch::kFloat);
    plan.validate(world_size);
    for (int r = 0; r < world_size; ++r) {
      const InferencePlacement at = inference_placement(plan, r);
      colocated.at(static_cast<size_t>(at.replica)).at(static_cast<size_t>(at.tp_rank)) = r;
    }
  }
  const int size = p.rollout_instance_size();  // rollout.tp or rollout.ep ranks
  for (int i = 0; i < layout.instances; ++i) {
    std::vector<int> ranks;
    for (int t = 0; t < size; ++t) ranks.push_back(first + i * size + t);
    if (instances_take_resharded_shards(config, world_size))
      ranks = colocated[static_cast<size_t>(i)];
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) {
      layout.instances_here.push_back(i);
    }
    layout.instance_ranks.push_back(ranks);
  }
  return layout;
}

}  // namespace aspen::pipeline
