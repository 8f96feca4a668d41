// RolloutWorker's multi-turn trajectories (rollout_worker.h, "turns"): claimed rows
// started in the trajectory source (TrajectoryLoop or AgentLoop), their turns added to
// the engine, finished claims written to the dock.
#include <algorithm>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/instance_plan.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/pipeline/rollout_worker.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {
namespace {

// A turn's sampling: the group's parameters with the turn's token budget, stopped at the
// template's end-of-turn token, and a seed of its own per turn (the same group, sample
// and turn sample the same tokens on any instance; turns do not reuse one stream).
SamplingParams turn_sampling(const TrainConfig& config, int64_t group, int64_t turn,
                             int64_t max_tokens, TokenId end_of_turn) {
  SamplingParams params = rollout_sampling(config, group);
  params.max_tokens = max_tokens;
  params.min_tokens = 0;  // the long-tail workload is single-turn's
  params.stop_token_ids.push_back(end_of_turn);
  params.seed = *params.seed + static_cast<uint64_t>(turn) * 0x9E3779B97F4A7C15ULL;
  return params;
}

}  // namespace

void RolloutWorker::start_trajectories(HeldClaim& held, const std::vector<ColumnData>& columns) {
  const ColumnData& samples = find_column(columns, rl_columns::kSampleIndex);
  const ColumnData& examples = find_column(columns, rl_columns::kExample);
  for (size_t i = 0; i < held.claim.rows.size(); ++i) {
    const int64_t sample = samples.values[i].item<int64_t>();
    held.row_samples.push_back(sample);
    loop_->start({held.claim.lease, held.claim.rows[i].info.group_id, sample},
                 options_.trajectories->data_row(
                     options_.trajectories->example(examples.values[i].item<int64_t>())));
  }
}

void RolloutWorker::drive_trajectories() {
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  loop_->poll(next, finished);
  for (TrajectoryLoop::NextTurn& turn : next) {
    auto held = held_.find(turn.key.lease);
    if (held == held_.end()) continue;  // its claim was given up
    GenerationRequest request;
    request.id = std::to_string(turn.key.group) + "/" + std::to_string(turn.key.lease) + "/" +
                 std::to_string(turn.key.sample) + "/t" + std::to_string(turn.turn);
    request.prompt = std::move(turn.context);
    request.params =
        turn_sampling(config_, turn.key.group, turn.turn, turn.max_tokens, loop_->end_of_turn());
    if (turn.params) {  // an agent's call: its own sampling, the same budget and stop
      SamplingParams own = *turn.params;
      own.max_tokens = request.params.max_tokens;
      own.min_tokens = 0;
      own.stop_token_ids.push_back(loop_->end_of_turn());
      if (!own.seed) own.seed = request.params.seed;
      request.params = std::move(own);
    }
    request.sample_indices = {turn.key.sample};
    const std::string id = request.id;
    // A TP instance's followers add the same turn with the same sampling (instance_plan.h).
    std::optional<PlannedRequest> planned;
    if (options_.peers) planned = planned_addition(request);
    try {
      engine_.add_request(std::move(request));
    } catch (const Error& e) {
      // A context the engine cannot hold (longer than its KV cache or model length): an
      // agent's call gets the error; otherwise the group leaves the dock when its claim
      // finishes, as a refused single-turn row does.
      if (loop_->turn_refused(turn.key, e.what())) continue;
      log_error("rollout instance ", options_.instance, ": trajectory ", id, " dropped: ", e.what());
      held->second.aborted = true;
      Trajectory ended;
      ended.end = TrajectoryEnd::kMaxTokens;
      held->second.trajectories[{turn.key.group, turn.key.sample}] = std::move(ended);
      continue;
    }
    held->second.requests.push_back(id);
    origins_[id] = {turn.key.group, turn.key.lease};
    if (planned) plan_requests_.push_back(std::move(*planned));
  }
  for (TrajectoryLoop::Finished& done : finished) {
    auto held = held_.find(done.key.lease);
    if (held == held_.end()) continue;
    if (done.trajectory.end == TrajectoryEnd::kEnvironment) {
      ++status_.environment_errors;
      log_warn("rollout instance ", options_.instance, ": trajectory of group ", done.key.group,
               " sample ", done.key.sample, " failed: ", done.trajectory.error);
    }
    held->second.trajectories[{done.key.group, done.key.sample}] = std::move(done.trajectory);
  }
  std::vector<int64_t> whole;
  for (auto& [lease, held] : held_) {
    if (held.trajectories.size() == held.claim.rows.size()) whole.push_back(lease);
  }
  // The status (the loop's counters: episodes, calls, faults) goes out before the rows
  // do, so the metrics line of the batch that trains them counts every trajectory in it;
  // the periodic status alone lags a claim behind.
  if (!whole.empty()) post_status(false);
  for (int64_t lease : whole) {
    HeldClaim& held = held_.at(lease);
    // Turns still generating belong to agent programs that ended during their call.
    for (const std::string& id : held.requests) {
      if (engine_.abort_request(id) && options_.peers) plan_requests_.push_back(planned_abort(id));
      origins_.erase(id);
    }
    finish_trajectory_claim(held);
    held_.erase(lease);
  }
}

void RolloutWorker::finish_trajectory_claim(HeldClaim& held) {
  const bool drop_failed =
      config_.rollout.environment.on_error == EnvironmentErrorPolicy::kDrop;
  bool discard = held.aborted;
  size_t failed = 0;
  std::string error;
  for (auto& [key, t] : held.trajectories) {
    if (t.end != TrajectoryEnd::kEnvironment) continue;
    ++failed;
    error = t.error;
    // A trajectory that failed before its first turn (at reset) has nothing to train
    // on, whatever the policy: its group leaves the dock.
    if (drop_failed || t.turns() == 0) discard = true;
    t.has_reward = true;  // on_error zero: trained with reward 0
    t.reward = 0;
  }
  // An environment that fails every trajectory is broken, not flaky: under `drop` no
  // batch would ever fill (the run would wait forever), under `zero` it would train on
  // nothing but zeros. Claims whose trajectories all failed, kMaxFailedClaims in a row,
  // end the run with the environment's last error.
  consecutive_failed_claims_ = failed == held.trajectories.size() ? consecutive_failed_claims_ + 1 : 0;
  check_input(consecutive_failed_claims_ < kMaxFailedClaims,
              "every trajectory of the last " + std::to_string(kMaxFailedClaims) +
                  " claims failed; the last: " + error,
              config_.rollout.agent.command.empty()
                  ? "rollout.environment (" +
                        std::string(name_of(config_.rollout.environment.kind)) + ")"
                  : "rollout.agent.command",
              "fix the environment or agent; a flaky one may fail some trajectories, not all");
  if (discard) {
    log_warn("rollout instance ", options_.instance, ": the groups of lease ", held.claim.lease,
             " leave the dock (a trajectory failed or was refused)");
    dock_.discard(held.claim.row_ids());
    return;
  }
  std::vector<RowId> ids;
  std::vector<RowInfo> infos;
  std::vector<Trajectory> ordered;
  for (size_t i = 0; i < held.claim.rows.size(); ++i) {
    const ClaimedRow& row = held.claim.rows[i];
    Trajectory& t = held.trajectories.at({row.info.group_id, held.row_samples[i]});
    RowInfo info = row.info;
    info.tokens = static_cast<int64_t>(t.response.size());
    // Staleness counts from the trajectory's oldest model token (trajectory.h).
    if (!t.versions.empty()) info.version = *std::min_element(t.versions.begin(), t.versions.end());
    ids.push_back(row.id);
    infos.push_back(info);
    ordered.push_back(std::move(t));
  }
  int64_t prompt_tokens = 0;
  for (const Trajectory& t : ordered) prompt_tokens += static_cast<int64_t>(t.prompt.size());
  publish_claim(held, ids, infos, trajectory_columns(ordered), prompt_tokens);
}

}  // namespace aspen::pipeline
