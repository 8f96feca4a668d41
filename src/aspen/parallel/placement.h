// Placement: which ranks of the job train (a DP x TP grid) and which run rollout
// instances (each with its own TP), colocated or disaggregated.
//
//   colocated:      every rank trains AND serves rollout, time-sliced (the trainer's
//                   optimizer state is swapped out while rollout runs: swap_space.h).
//                   world = train_dp * train_tp * train_pp
//                         = rollout_instances * rollout_tp * rollout_ep.
//   disaggregated:  ranks [0, train_dp * train_tp * train_pp) train; the next
//                   rollout_instances * rollout_tp * rollout_ep ranks serve rollout.
//                   world = train_dp * train_tp * train_pp + rollout_instances * rollout_tp * rollout_ep.
// Rank order inside each grid is TP fastest (Megatron's): training rank p has
// tp_rank p % train_tp and dp_rank p / train_tp; with pipeline parallelism
// (train_pp > 1) the stages come next: a data-parallel replica is train_tp * train_pp
// consecutive ranks (so its rows go to one contiguous block, as under TP alone),
// pp_rank (p / train_tp) % train_pp and dp_rank p / (train_tp * train_pp). (The
// simulator models every such grid; what `aspen train` runs on stages so far is
// checked where it starts, config/pipeline_parallel_checks.h.) With expert
// parallelism (train_ep > 1, train_tp = 1) the data-parallel replicas form
// train_dp / train_ep groups of train_ep consecutive replicas that split every MoE
// layer's experts (each rank still trains its own rows: EP sits inside DP, as in
// Megatron): without PP a group is train_ep consecutive ranks and ranks p with the
// same p % train_ep hold the same experts (the expert-data-parallel group); with
// train_pp > 1 each stage has its own groups, that stage's ranks of those replicas
// (train_pp apart: ranks (g * train_ep + e) * train_pp + s), and the ranks of one
// stage s and one e hold the same experts (the groups are made in pipeline/rl_run.cpp,
// make_train_groups). With train_tp > 1 too, train_ep
// must equal train_tp: each TP group splits attention by heads and the experts whole
// over the same ranks, which hold the same tokens (the DP group of a TP index then
// holds the same experts); a rollout rank q (counted from the
// first rollout rank) belongs to instance q / rollout_tp with tp_rank q % rollout_tp.
// For colocated placement the rollout grid is the resharder's inference layout
// (resharder.h): instance = InferencePlacement::replica, so each rank's rollout shard
// is exactly what the resharder hands it.
// Errors: aspen::Error naming the field for a grid that does not match the world.
// Thread safety: plain values.
#pragma once

#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/resharder.h"

namespace aspen::parallel {

enum class PlacementMode { kColocated, kDisaggregated };
// "colocated" | "disaggregated": the spelling of placement.mode in configs.
const char* name_of(PlacementMode mode);

struct Placement {
  PlacementMode mode = PlacementMode::kColocated;
  int train_dp = 1;
  int train_tp = 1;
  int rollout_instances = 1;
  int rollout_tp = 1;
  // colocated: the trainer's optimizer moments and gradients leave memory while the
  // rollout runs and come back before the update (swap_space.h).
  bool swap = false;
  // Expert parallelism inside the data-parallel trainers (above); last, so that
  // positional initialisers of the grid keep their meaning.
  int train_ep = 1;
  // Expert parallelism inside each rollout instance: an instance is rollout_ep
  // consecutive ranks (instead of rollout_tp) that step one batch together, each
  // holding E / rollout_ep experts of every MoE layer (model/qwen_moe_block.h,
  // replicated tokens). Needs rollout_tp = 1.
  int rollout_ep = 1;
  // Pipeline parallelism: the trainer's decoder layers split into train_pp contiguous
  // stages (parallel/pipeline_stages.h), one rank each, inside every replica (above).
  int train_pp = 1;

  // Ranks of one data-parallel training replica: its TP ranks times its stages.
  int train_replica_size() const { return train_tp * train_pp; }
  // Ranks of one rollout instance: rollout_tp x rollout_ep (one of them is 1).
  int rollout_instance_size() const { return rollout_tp * rollout_ep; }
  int world_size() const;
  // aspen::Error naming `where`.field when the grid is inconsistent with world_size.
  void validate(int world_size, const std::string& where) const;
  // The resharder plan of a colocated placement (the DP x PP x TP train grid -> rollout TP).
  ReshardPlan reshard_plan(torch::ScalarType dtype) const;
};

struct RankRoles {
  bool trains = false;
  int train_dp_rank = -1;
  int train_tp_rank = -1;
  int train_pp_rank = -1;  // the pipeline stage (0 without PP)
  bool serves_rollout = false;
  int rollout_instance = -1;
  int rollout_tp_rank = -1;
  int rollout_ep_rank = -1;  // with rollout_ep > 1 (rollout_tp_rank is then 0)
};

RankRoles roles_of(const Placement& placement, int rank);

}  // namespace aspen::parallel
