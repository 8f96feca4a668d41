// EngineLayout: which ranks of a run train and which run which rollout instances,
// for the iteration engine (iteration_engine.h), from the config's placement.
//   one process     rank 0 trains and runs pipeline.instances instances (threads).
//   colocated       every rank trains (the DP x PP x TP grid, TP fastest, then the
//                   pipeline stages: a replica is train.tp x train.pp ranks) and belongs to
//                   one instance of rollout.tp ranks. With rollout.tp 1 instance i is
//                   rank i; with rollout.tp > 1 the instances are the replicas of the
//                   resharder's inference layout (Placement::reshard_plan), so each
//                   rank's inference shard is what its own reshard produces.
//   disaggregated   ranks [0, dp x tp x pp) train; instance i is the rollout.tp ranks
//                   after them starting at dp x tp x pp + i x rollout.tp.
// An instance's first rank (its inference TP rank 0) leads it.
// Errors: aspen::Error (from ReshardPlan::validate) for a colocated layout the
// resharder cannot serve. Thread safety: pure functions.
#pragma once

#include <vector>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

struct EngineLayout {
  int rank = 0;
  int trainers = 1;  // ranks [0, trainers) train: a DP x PP x TP grid, TP fastest
  int train_tp = 1;
  int train_pp = 1;
  // Trainer ranks of one data-parallel replica (they hold the same rows).
  int replica_size() const { return train_tp * train_pp; }
  int instances = 1;                             // rollout instances in the run
  std::vector<int> instances_here;               // this rank's (led or followed)
  std::vector<std::vector<int>> instance_ranks;  // [instance] -> its ranks, leader first
  bool trains() const { return rank < trainers; }
};

EngineLayout engine_layout(const TrainConfig& config, int rank, int world_size);

// Colocated tensor-parallel instances (rollout.tp > 1 on a multi-rank colocated
// placement) take their weights as shards resharded on their own ranks.
bool instances_take_resharded_shards(const TrainConfig& config, int world_size);

}  // namespace aspen::pipeline
