// TrainerStages: the trainer's part of an RL sample's trip, in ONE pass over the rows
// it holds. The batch's rows come with their columns from the batch claim's read
// (prompt, response, the rollout's log-probs and routing); the stages then run in
// memory on one TrainBatch, and nothing is written back to the dock, since no other
// role reads what they compute:
//
//   reference      frozen reference log-probs (a KL term)           -> ref_logprobs
//   old_logprobs   recomputed, or the rollout's when the update is
//                  exactly on-policy or takes the proximal policy
//                  from its own forward pass (decoupled PPO)         -> old_logprobs
//   values         critic values (ppo)                               -> values
//   advantage      batch_advantages.h over the WHOLE batch           -> advantages, returns
//   update         the actor's (and critic's) optimizer steps
//
// Several trainers (data-parallel shares, each share on its tensor-parallel ranks):
// each computes the first three on its share; the advantage needs the whole batch
// (group baselines, whitening, the KL controller), so the per-token inputs it needs
// from the other shares (old and reference log-probs with kl_in_reward, ppo values)
// are all-gathered over the trainers, every trainer computes the same advantages
// and keeps its share's. Without those inputs nothing is gathered: the per-row
// inputs (lengths, groups, shaped scores) are in the batch plan every trainer has.
//
// Contract: rows.rows holds the batch's rows (metadata), claim order; with several
// trainers rows.rows.ranks partitions them into data-parallel shares (share d on
// trainer ranks d*tp .. d*tp+tp-1, tp counting a replica's TP ranks times its pipeline
// stages: every stage takes the share's rows, as a TP rank does); rows.scores has one
// shaped score per row.
// prepare() and update() are collective over the trainers (every rank calls them, an
// empty share too); with one trainer they touch no process group.
// Errors: aspen::Error for columns that disagree with the rows' metadata.
// Thread safety: the trainer's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "aspen/dock/dock_api.h"
#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/report/trace_writer.h"

namespace aspen::pipeline {

// The batch (or a streamed part of it) as every trainer knows it.
struct TrainerRows {
  Claim rows;                  // metadata of every row; ranks: the data-parallel shares
  std::vector<double> scores;  // shaped score per row of `rows`, claim order
};

struct TrainerContext {
  const TrainConfig* config = nullptr;
  RlWorkers* workers = nullptr;
  std::optional<ProcessGroupHandle> trainers;  // several trainers: all of them
  int dp_rank = 0;                             // this rank's share
  int tp = 1;                                  // trainer ranks per share (TP x PP)
  TraceWriter* trace = nullptr;                // null: no timeline
  int track = 0;
};

// One trainer's share, ready for the update: every column the update reads.
struct PreparedShare {
  TrainBatch batch;
  std::vector<int64_t> versions;  // policy version of each of the share's rows
  bool proximal_is_current = false;
  AdvantageStats advantages;  // of the whole batch
};

class TrainerStages {
 public:
  explicit TrainerStages(TrainerContext context);

  // This rank's share of `rows` (all of them with one trainer).
  Claim share(const TrainerRows& rows) const;
  // The stages before the update on this rank's share, whose columns (as
  // TransferDock::get returns them for share(rows)) are `share_columns`;
  // `policy_version`: the weights about to be updated. Each stage's seconds add to
  // stage_seconds[name].
  PreparedShare prepare(const TrainerRows& rows, const std::vector<ColumnData>& share_columns,
                        int64_t policy_version, nlohmann::json& stage_seconds);
  // The actor's (and critic's) update on the share. rows and response_tokens are the
  // whole batch's; row_versions this share's.
  UpdateStats update(const PreparedShare& share, uint64_t seed);
  // Streaming (one trainer, single-step, no critic): the share goes into the actor's
  // accumulated gradients; finish() takes the one optimizer step.
  UpdateStats accumulate(const PreparedShare& share, uint64_t seed);
  ActorMetrics finish(uint64_t seed);

 private:
  // The whole batch's per-token `local` (this share's) in share order: gathered over
  // the trainers, or `local` itself with one trainer.
  torch::Tensor whole_batch_tokens(const torch::Tensor& local,
                                   const std::vector<int64_t>& share_tokens);

  const TrainConfig& config_;
  RlWorkers& workers_;
  TrainerContext context_;
};

}  // namespace aspen::pipeline
