// The cluster simulator: the real RL schedule on a virtual clock. What runs unchanged
// is the code that decides: the dock controller (claims, required windows, leases,
// retirement; dock/controller.h) on a ManualClock, the admission and batch-claim
// rules of the staleness window (pipeline/staleness_window.h), the dispatcher
// (pipeline/dispatch_policy.h), the instances' claim and work-stealing rule
// (pipeline/rollout_claims.h) and the bubble accounting (report/bubble_accounting.h).
// What is modelled is the work: rollout engine steps (SimulatedInstance on the
// CostModel), reward, the trainer's passes and updates, weight publish and fetch.
//
// Roles, as the iteration engine runs them (iteration_engine.h):
//   trainer     admits groups (allocating their rows with the dispatcher's target) up
//               to the admission bound, claims update i's batch (whole, or streamed in
//               parts), runs the stages (reference, old log-probs when the update is
//               not a single step, values, advantage, actor and critic update) in
//               memory on the batch's rows as the trainer does (pipeline/trainer_stages.h:
//               time, no dock calls), then the optimizer step and the publish.
//   instances   claim groups dispatched to them while they have room (max_num_seqs),
//               stealing any when dry; load newer weights at a step boundary (or as
//               weight_switch says); finish a group by publishing its response, its true
//               lengths and version, and acking the lease. Right after a load, with
//               partial rollouts, while another instance is idle, they cut the units
//               that ran under older weights (rollout_worker.h "partial"): the rows go
//               back to the dock with their progress and any instance resumes them,
//               prefilling prompt + output.
//   reward      one verifier per instance, reward_s per sample, in order.
// Admission, claims and waits happen at events (a group scored, a step ended, an update
// done) rather than on the real engine's 20 ms polls.
//
// With over-sampling the trainer's batch claim is the staleness window's (min_version),
// and once a batch is whole the trainer aborts the stragglers nobody holds (queued, or
// scored and waiting), as Admission::abort_stragglers does; the others first finish.
// Output (JSON): effective_tps (trained response tokens / wall), samples_per_s,
// seconds_per_step, bubbles (iteration-time-weighted, as aspen bench pipeline reports
// them), utilisation per role (busy device-seconds / (devices x wall)), the rollout's
// steps, preemptions and mean batch, partial rollouts' cuts and resumes, the aborted
// groups and their wasted tokens, the tool calls and the tool_wait bubble (instance
// seconds with nothing to run but pending tool calls, over instances x wall), and the
// controller's metrics.
// Thread safety: one simulation per call, on the calling thread.
// Errors: aspen::Error for an inconsistent spec.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/pipeline/dispatch_policy.h"
#include "aspen/sim/cost_model.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/workload.h"

namespace aspen::sim {

// What an instance does with its running sequences when newer weights are published:
// continue on them at the next step (in-flight, the engine's default), recompute their
// KV on them (pipeline.interrupt), or finish them first on the old weights and load when
// idle, taking no new groups meanwhile (drain: simulate.drain_on_update).
enum class WeightSwitch { kInFlight, kRecompute, kDrain };

struct SimulationSpec {
  ModelCost model;
  DevicePreset device;
  ClusterShape cluster;
  TrainerOverheads overheads;
  LengthModel lengths;
  ToolModel tools;  // multi-turn trajectories with tool latency; one turn: none
  bool async = true;
  int64_t eta = 1;  // 0 in sync mode
  int64_t iterations = 10;
  int64_t prompts_per_iteration = 64;
  int64_t n = 8;
  int64_t dispatch_chunk = 8;
  DispatchPolicyKind dispatch = DispatchPolicyKind::kQueueAware;
  bool stream_updates = false;
  int64_t sync_every = 1;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  bool reference = false;
  bool critic = false;
  int64_t epochs = 1;
  int64_t optimizer_steps = 1;  // per update: epochs x mini-batches
  bool recompute_old_logprobs = false;
  double reward_s_per_sample = 0.0;
  // Issue #36's mechanisms, as the engine runs them (docs/simulate.md).
  WeightSwitch weight_switch = WeightSwitch::kInFlight;
  bool partial_rollout = false;  // pipeline.partial_rollout
  int64_t partial_rollout_min_tokens = 32;
  int64_t over_sample_groups = 0;  // pipeline.over_sample's ceil(f B); > 0: abort stragglers
  std::string trace_path;  // Chrome trace of the simulated run; empty: none
};

nlohmann::json run_simulation(const SimulationSpec& spec);

}  // namespace aspen::sim
