// IterationEngine: the RL pipeline as ONE engine for every mode and process layout,
// with the TransferDock as its only ledger. pipeline.mode async is ASP at
// eta = pipeline.max_staleness; sync is the same engine at eta = 0 with whole-batch
// updates (never streamed, so each update is the same computation however the
// groups finished). The run driver (rl_run.h) owns everything around it: SFT warm-up,
// evaluation, metrics file, checkpoints, export.
//
// The engine is a conductor; each concept is a part of its own:
//   Admission        (admission.h)        prompt groups into the dock, the staleness
//                                          window, the instances' states and failures
//   BatchSelector    (batch_selection.h)  the batch claim, DAPO rounds, streamed parts
//   TrainerStages    (trainer_stages.h)   reference, old log-probs, values, advantages
//                                          and the update, in one pass in memory
//   WeightPublisher  (weight_publisher.h) resharding, the gathered policy, the board
//   ProcessWorkers   (process_workers.h)  this process's rollout instances and reward
//                                          worker on their threads
//   TrainingStateSwap (training_state_swap.h) placement.swap's optimizer offload
//
// Layouts (placement.h; rollout instances run at rollout TP 1, trainers at any DP x TP):
//   one process      the trainer on the driver thread, pipeline.instances rollout
//                    instances on threads of their own, a reward thread; the dock is
//                    in-process.
//   colocated        (aspen launch) every rank trains (the DP x TP grid) AND runs a
//                    rollout instance thread (a rank of one, rollout.tp ranks per
//                    instance) and a reward thread.
//   disaggregated    (aspen launch) ranks [0, dp x tp) train; each instance is the
//                    next rollout.tp ranks (its main thread) with a reward thread.
//
// The ledger. A prompt group's n rows are allocated at admission by trainer 0. From
// then on the controller holds everything:
//   dispatched    claimable by consumer "rollout" of its target instance (any
//                 instance once its lease expired or its instance was declared dead);
//   generated     response columns published, tokens and version updated;
//   scored        "reward" acked (the verifier score also in its own column);
//   in a batch    leased by consumer "batch", acked after the update;
//   retired       every consumer acked it; or discarded (no instance could serve it,
//                 or dynamic sampling dropped its group).
//
// One iteration = one update. Trainer 0 chooses the batch (BatchSelector); with
// several trainers it posts the BatchPlan (batch_plan.h: rows split into
// data-parallel shares) on the status board, since the wait for a batch has no bound
// and stays out of collectives, which time out; every trainer reads its share's
// columns (trainer 0 has them from the batch read) and runs the TrainerStages.
// Streaming (pipeline.stream_updates, one trainer, single-step group-local updates):
// the batch is claimed in parts, each trained as it comes (gradients accumulated), one
// optimizer step when the batch is whole. Swap (placement.swap, eta 0 only): the
// trainer's optimizer state and gradients leave memory while it waits for its batch.
//
// Weights: every trainer rank publishes the policy as a versioned WeightSet on its own
// warehouse every sync_every updates; an instance loads the newest set of its rank's
// warehouse (a rollout-only rank: trainer 0's, fetched over the dock) at a step
// boundary. Colocated tensor-parallel instances instead take the shard their own rank
// resharded from the training layout (allgather-swap, resharder.h).
//
// Where rows live: a training rank keeps what it writes in its own warehouse; a
// rollout-only rank keeps none and writes its finished rows into trainer 0's
// (make_distributed_dock's write_to_rank0), so its death takes only unfinished
// generation with it. A trainer's failure ends the run (the launcher stops every rank).
//
// Bubbles per iteration (bubble_accounting.h): trainer idle split into sorting and
// starvation; rollout idle and skewness from the instances' busy seconds on the
// board; staleness of trained rows.
// Thread safety: construction, iteration(), state(), restore(), serve() and stop() on
// the driver's thread; iteration/state/restore between iterations only.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/admission.h"
#include "aspen/pipeline/batch_plan.h"
#include "aspen/pipeline/batch_selection.h"
#include "aspen/pipeline/distributed_dock.h"
#include "aspen/pipeline/engine_layout.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/process_workers.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/pipeline/trainer_stages.h"
#include "aspen/pipeline/training_state_swap.h"
#include "aspen/pipeline/weight_publisher.h"
#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/report/trace_writer.h"

namespace aspen::pipeline {

struct EngineContext {
  const TrainConfig& config;
  RlSetup& setup;
  RlWorkers& workers;
  TraceWriter* trace = nullptr;  // null: no timeline
  // Test hook: called by a role ("collector" per finished group, "trainer" before
  // each update) so tests can inject random delays; empty in real runs.
  std::function<void(const std::string& role)> inject_delay = {};
  // Whether the driver reads setup.model (the full policy) after iteration `index`:
  // an evaluation, a checkpoint, the export. The engine then gathers it within that
  // iteration (its "gather" stage) when the trainers hold less than the full policy
  // (weight_publisher.h). It must answer from the config and the index alone, the
  // same on every rank (the gather is collective). Empty: after every iteration.
  std::function<bool(int64_t index)> reads_full_policy_after = {};
};

class IterationEngine {
 public:
  // `world`: the ranks of an aspen launch job (nullopt: one process). Collective over
  // `world` (every rank constructs it).
  IterationEngine(const EngineContext& context, std::optional<ProcessGroupHandle> world);
  ~IterationEngine() { stop(); }

  // One training batch of prompts_per_iteration groups: its metrics line.
  nlohmann::json iteration(int64_t index);
  // What a checkpoint needs; restore() before the first iteration.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);
  // Makes setup.model the trainers' policy of the current version for a reader (a
  // no-op when it already is, or when the actor trains setup.model itself); returns
  // whether it gathered. Collective over the trainers when it gathers: every trainer
  // calls it at the same points; iteration() already did for the iterations that
  // reads_full_policy_after names, so there it only guards.
  bool ensure_full_policy();
  // Ends the workers; called once after the last iteration (idempotent).
  void stop();
  int64_t samples() const { return samples_; }                 // rows drawn into batches
  int64_t trained_tokens() const { return trained_tokens_; }   // response tokens trained
  // A rank that only serves rollout (disaggregated placement) runs serve() until the
  // run is over instead of iterations, and writes nothing.
  bool serves_only() const { return !layout_.trains(); }
  void serve() { workers_->serve(); }
  // The ranks that evaluate and leave together at the end: the trainers (a rollout
  // rank may have failed and left under pipeline.on_instance_failure); nullopt with
  // one trainer.
  std::optional<ProcessGroupHandle> trainer_group() const { return trainers_; }
  bool evaluates_on_trainers() const { return world_.has_value(); }

 private:
  bool is_admitter() const { return layout_.rank == 0; }
  // Trainer 0's batch, every trainer's share of it (the plan crosses ranks).
  BatchPlan plan_batch(int64_t index, ChosenRows& chosen, BatchWait& wait);
  void train_whole_batch(int64_t index, const BatchPlan& plan,
                         const std::vector<ColumnData>& share_columns, IterationRecord& record);
  void stream_batch(int64_t index, IterationRecord& record, ChosenRows& drawn, BatchWait& wait);
  void publish();
  // Polls the status board until `key` is posted; returns its value.
  std::string await_status(const std::string& key);
  nlohmann::json metrics_line(int64_t index, IterationRecord& record, const BatchWait& wait,
                              int64_t trained_groups, int64_t swapped_bytes);

  const TrainConfig& config_;
  RlSetup& setup_;
  RlWorkers& rl_workers_;
  TraceWriter* trace_;
  std::function<void(const std::string&)> inject_delay_;
  std::function<bool(int64_t)> reads_full_policy_after_;
  std::optional<ProcessGroupHandle> world_;
  EngineLayout layout_;
  std::optional<ProcessGroupHandle> trainers_;  // trainer ranks (several trainers only)
  int trainer_track_ = 0;
  bool streams_ = false;

  DistributedDock distributed_;               // across ranks
  std::unique_ptr<TransferDock> local_dock_;  // one process
  TransferDock* dock_ = nullptr;

  std::optional<WeightPublisher> publisher_;
  TrainingStateSwap swap_{false};
  std::unique_ptr<ProcessWorkers> workers_;
  std::optional<Admission> admission_;      // trainer 0
  std::optional<BatchSelector> selector_;   // trainer 0
  std::optional<TrainerStages> stages_;     // trainers

  int64_t version_ = 0;  // the trainers' policy version
  int64_t samples_ = 0;  // rows generated and drawn into batches (trained or dropped)
  int64_t trained_tokens_ = 0;
  int64_t row_calls_before_ = 0;  // the dock's row_calls() at the last metrics line
  int blas_threads_before_ = 0;
  bool stopped_ = false;
};

}  // namespace aspen::pipeline
