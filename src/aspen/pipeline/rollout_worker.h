// RolloutWorker: one rollout instance of the pipeline, as a dock consumer. It runs
// on its own thread (one process: the instances are threads) or as the main loop of
// a rollout rank (aspen launch, disaggregated placement); the code is the same.
//
// Loop, until stopped or the run's status says it is over:
//   weights  at a step boundary, load the newest set the trainers published
//            (WarehouseApi::latest_weights of `weights_from`, or with
//            pipeline.weight_sync: delta the deltas after the version it holds:
//            WeightReceiver) when it is newer than the engine's; with
//            interrupt_on_weight_update in-flight samples are
//            recomputed on it (RolloutEngine).
//   claim    whole groups of consumer "rollout" dispatched to this instance
//            (ClaimOptions::target) whose admission version is <= the loaded weights'
//            version: an instance never generates a row with weights older than the
//            version it was admitted at, so the admission bound of the staleness
//            control (iteration_engine.h) holds exactly across ranks. It claims only
//            while its engine has room for one more group (max_num_seqs); the other
//            dispatched groups wait in the dock, and an instance with nothing to run
//            takes one dispatched elsewhere (work stealing: the dispatcher's choice is
//            a preference, so a misestimated queue never idles an instance). The rule
//            is rollout_claims.h's, which the simulator runs too.
//   step     one continuous-batching step over everything claimed.
//   finish   a claim whose samples are all done: response and rollout_logprobs go into
//            this process's warehouse, published with the rows' true token counts and
//            policy versions (of their first token) in one controller call, then the
//            lease is acked. Rows the engine cannot take (e.g. longer than its KV
//            cache) are discarded from the dock, with an error in the log.
//   partial  pipeline.partial_rollout (verl's partial_rollout, slime's APRIL): right
//            after loading new weights, while another instance reports an empty queue
//            on the board, each unit that started under older ones and holds an
//            unfinished sample of >= partial_rollout_min_tokens output tokens is cut:
//            the engine gives up its unfinished samples (RolloutEngine::
//            cut_request), every row's output so far (tokens, log-probs, versions,
//            routing; a finished row's whole output with its finish reason) goes into
//            the rows' partial_* columns with version = its oldest token's, and the
//            lease is released: the rows return to the pool without a target. This
//            instance claims nothing in that loop turn, so an instance waiting for work
//            takes them first. Whoever claims them resumes each unfinished row as a
//            request of its own (prompt + output prefilled under its weights, the
//            sample's seed stream continued) and completes the finished ones as they
//            are. The boundary is the weight switch because that is when a sample's
//            KV turns stale, and where the long tail of a batch meets the next one:
//            the cut tail moves to whichever instance is free (docs/design.md). With
//            no idle peer nothing is cut: the instance would take its own units back
//            and pay their prefill again for nothing (measured: docs/benchmarks.md).
//   unit     a claim is pipeline.dispatch_chunk samples: whole groups by default
//            (the prompt computed once, its KV blocks shared), or chunks of a group,
//            so that a long group's samples spread over instances. A row's sample
//            index (column sample_index) picks its seed: the samples are the same
//            however a group is split.
//   leases   every held group's lease is renewed each lease_s / 4, so a live instance
//            keeps its groups however long they take and a dead one (killed, hung)
//            loses them after lease_s: the controller returns them to the pool without
//            a target, and any other instance regenerates them (same seeds, same samples).
//   status   its InstanceStatus is posted on the controller's board at least every
//            status_period_s while it works (and after every claim), so a dispatcher
//            anywhere sees its queue state no older than status_period_s + one engine
//            step + one dock round trip.
//   turns    with rollout.environment (trajectories.h), a claimed row is a multi-turn
//            trajectory: the instance's TrajectoryLoop resets its environment and
//            renders its prompt off this thread, then each model turn is one engine
//            request of its own (the context so far, token for token; stopped at the
//            template's end-of-turn token; seeded per group, sample and turn), and the
//            environment's step runs off this thread while the engine steps the other
//            trajectories. A trajectory waiting on its environment counts as running
//            in the instance's load (has_room, its status). The claim finishes when all
//            its trajectories have: their response (model and observation tokens), loss
//            mask, turns and rewards go to the dock with the rendered prompt
//            (rl_rows.h); under rollout.environment.on_error drop a claim with a
//            failed trajectory leaves the dock whole instead. With rollout.agent.command
//            the same code drives an AgentLoop (agent_loop.h): each trajectory is a run
//            of the agent program, whose calls to the instance's own endpoint are its
//            turns; a claim whose programs all ended gives up the turns it still has in
//            the engine (a program that printed its reward mid-call).
// Tensor-parallel instances (rollout.tp = t > 1): the instance's t ranks each hold
// their shards of the model and step one engine replica together (the model's
// collectives over `peers`). The leader (peer rank 0) runs the loop above; before
// every step it broadcasts a plan over `peers` - new weights (their tensors follow,
// or, colocated, only their version: each peer takes that version of the shards its
// own rank resharded, `own_shards`), the requests it added, step or stop - and the
// followers (follow()) apply it in the same order, so every replica schedules exactly
// the same batches (instance_plan.h). Multi-turn trajectories run their loop and
// environments (or agent programs and their endpoint) on the leader alone: each turn it
// adds to the engine is planned with the sampling the leader gave it, and each turn it
// aborts (an agent that ended during its call) is planned too, so followers need neither.
// Fault injection for tests: ASPEN_FAULT_STEP_DELAY_MS=M sleeps a uniformly random
// 0..M ms after every engine step (a slow or jittery instance);
// ASPEN_FAULT_SIGKILL_RANK=R with ASPEN_FAULT_SIGKILL_AFTER_STEPS=S makes the process
// of rank R SIGKILL itself after S engine steps (mid-generation, holding leases).
// Thread safety: run() on one thread; stop() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/config/train_config.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/parallel/process_group.h"
#include "aspen/parallel/weight_set.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/instance_plan.h"
#include "aspen/pipeline/instance_status.h"
#include "aspen/pipeline/trajectory_environments.h"
#include "aspen/pipeline/trajectory_loop.h"
#include "aspen/pipeline/trajectory_source.h"
#include "aspen/pipeline/weight_receiver.h"
#include "aspen/rollout/engine.h"

// Forward declared in its own module's namespace (report).
namespace aspen::report {
class TraceWriter;
}  // namespace aspen::report

namespace aspen::pipeline {

struct RolloutWorkerOptions {
  int instance = 0;  // its index, the dispatch target it claims
  int rank = 0;      // the process it runs in (reported in its status)
  EngineConfig engine;
  int intra_op_threads = 1;  // torch threads of its steps (its own thread's budget)
  std::vector<int> cores;    // pin its thread here; empty: no pinning
  WarehouseId weights_from = 0;
  // The samples of one claim: config.h's dispatch_chunk() for the run's instances.
  int64_t dispatch_chunk = 1;
  double lease_s = 10.0;
  double status_period_s = 0.05;
  TraceWriter* trace = nullptr;  // spans of its steps on its own track
  // rollout.tp > 1: the instance's ranks, peer rank 0 leading (see above).
  std::optional<ProcessGroupHandle> peers;
  // Colocated tensor-parallel instance: this rank's inference shards, resharded from
  // the training layout on this very rank (allgather-swap), replace the dock's weight
  // board; the leader's plan then names only the version each peer takes.
  std::shared_ptr<WeightHistory> own_shards;
  // rollout.environment: the claimed rows are multi-turn trajectories (see "turns").
  std::shared_ptr<const TrajectoryEnvironments> trajectories;
};

// The run's state on the status board, posted by the trainer that admits groups.
inline constexpr const char* kRunStatusKey = "run";
inline constexpr const char* kRunDone = "done";

class RolloutWorker {
 public:
  // `model` becomes the instance's own (not trainable; on the rollout device).
  RolloutWorker(const TrainConfig& config, QwenForCausalLM model,
                std::shared_ptr<const Tokenizer> tokenizer, TransferDock& dock,
                RolloutWorkerOptions options);

  // Runs the loop until stop() or until the run status on the board is "done".
  // Errors of the dock or the engine propagate (aspen::Error).
  void run();
  // A follower of a tensor-parallel instance: applies the leader's plans until it
  // says stop.
  void follow();
  bool leads() const { return !options_.peers || options_.peers->rank() == 0; }
  void stop() { stopping_ = true; }
  // Called every loop iteration; its exception ends run() (e.g. the rank's reward
  // thread failed).
  void set_health_check(std::function<void()> check) { health_check_ = std::move(check); }

 private:
  // The rows of one rollout claim (lease) while they generate.
  struct HeldClaim {
    Claim claim;
    std::vector<int64_t> row_samples;   // the sample index of each claimed row
    std::vector<std::string> requests;  // engine request ids ("<group>/<lease>", names only)
    std::vector<Completion> samples;    // finished so far
    std::vector<int64_t> sample_groups;  // the prompt group of each of `samples`
    bool aborted = false;               // a part the engine refused
    int64_t started_version = 0;        // the engine's weights when it started
    // Trajectories: the finished ones, by (group, sample).
    std::map<std::pair<int64_t, int64_t>, Trajectory> trajectories;
  };
  // What an engine request id stands for: its ids are names for logs and the engine's
  // bookkeeping, never parsed back, so a request's group and lease are kept here.
  struct RequestOrigin {
    int64_t group = 0;
    int64_t lease = 0;
  };
  void run_loop();
  // Loads the newest published weights if newer than the engine's; true if it did.
  bool refresh_weights();
  // Partial rollouts at a weight switch: cuts the units the rule picks (see above);
  // true if it cut any.
  bool cut_at_weight_switch();
  // Another live instance reports nothing running or waiting (status board).
  bool peer_is_idle();
  // The unit's output so far (and its finished rows) into the dock; its lease returned.
  void cut_claim(HeldClaim& held);
  bool has_room() const;  // the engine could start one more group now
  // Claims dispatched groups while the engine has room (waits up to wait_s when it is
  // idle); returns how many.
  int64_t claim_groups(double wait_s);
  // Turns a claim into engine requests; false (rows discarded) if none was taken.
  bool start_claim(Claim claim);
  // Every row of the claim finished: its columns, lengths and versions go to the dock.
  void finish_claim(HeldClaim& held);
  // The finished rows' columns and infos into the dock and the lease acked (nothing
  // written when the lease had expired); counted in the status.
  void publish_claim(HeldClaim& held, const std::vector<RowId>& ids,
                     const std::vector<RowInfo>& infos, const std::vector<ColumnData>& columns,
                     int64_t prompt_tokens);
  void renew_leases();
  // Trajectories: starts the claim's rows in the loop (their environments reset).
  void start_trajectories(HeldClaim& held, const std::vector<ColumnData>& columns);
  // Trajectories: adds the turns the loop made ready and files finished trajectories;
  // finishes claims whose trajectories all ended.
  void drive_trajectories();
  // Every trajectory of the claim ended: its rows go to the dock (or leave it).
  void finish_trajectory_claim(HeldClaim& held);
  // The engine's load plus the trajectories waiting on their environments.
  QueueState load() const;
  void post_status(bool exited);
  // Leader of a TP instance: sends what changed since the last plan, then step/stop.
  void send_plan(bool step, bool stop);
  bool run_is_over();

  const TrainConfig& config_;
  TransferDock& dock_;
  RolloutWorkerOptions options_;
  RolloutEngine engine_;
  WeightReceiver weights_;  // pipeline.weight_sync: full sets or deltas from the dock
  // rollout.environment (TrajectoryLoop) or rollout.agent (AgentLoop); null: single-turn
  // rows.
  std::unique_ptr<TrajectorySource> loop_;
  static constexpr int64_t kMaxFailedClaims = 16;  // see finish_trajectory_claim
  // A TP follower waits this long for its own shards of the version its leader adopted
  // (follow()); its trainer publishes them within one update of the leader's.
  static constexpr std::chrono::steady_clock::duration kOwnShardsWait = std::chrono::seconds(120);
  int64_t consecutive_failed_claims_ = 0;
  int track_ = 0;
  std::map<int64_t, HeldClaim> held_;  // by lease
  std::map<std::string, RequestOrigin> origins_;  // by engine request id, while it runs
  InstanceStatus status_;
  std::chrono::steady_clock::time_point last_status_, last_renew_;
  int64_t step_delay_ms_ = 0;
  // Leader of a TP instance: what the next plan carries.
  std::shared_ptr<const WeightSet> plan_weights_;
  std::vector<PlannedRequest> plan_requests_;
  int64_t kill_after_steps_ = -1;  // fault injection: SIGKILL after this many steps
  int64_t steps_ = 0;
  std::atomic<bool> stopping_{false};
  std::function<void()> health_check_;
  std::chrono::steady_clock::time_point last_plan_;
};

}  // namespace aspen::pipeline
