#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rollout_claims.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulation_internal.h"
#include "aspen/util/error.h"

// The instances' side of the simulation (simulation_internal.h): claims, segments, weight
// switches, partial rollouts' cuts, over-sampling's aborts, finished groups and reward.
namespace aspen::sim {

void Simulation::wake(int i) {
  InstanceState& s = instances_[static_cast<size_t>(i)];
  if (!s.pending) {
    boundary(i);
  } else if (!s.loading && !s.engine->in_segment()) {
    // Waiting only for a tool call to return: the new work starts now.
    s.generation += 1;
    schedule(now(), EventKind::kInstance, i, s.generation);
  } else if (!s.loading && s.engine->in_segment() && has_room(s)) {
    // The worker takes new groups at the next step boundary.
    const double end = s.engine->cut_segment(now());
    s.generation += 1;
    schedule(end, EventKind::kInstance, i, s.generation);
  }
}

int64_t Simulation::claim_units(int i) {
  // The real instances' claim rule (pipeline/rollout_claims.h). The unclaimed counts
  // only skip the dock calls that are sure to come back empty: what is claimed is the
  // same.
  InstanceState& s = instances_[static_cast<size_t>(i)];
  RolloutClaimer claimer;
  claimer.has_room = [this, &s] { return has_room(s); };
  claimer.idle = [&s] { return s.engine->idle(); };
  claimer.claim = [this, i, &s](const ClaimOptions& options) {
    const bool own = options.target == i;
    if (own ? s.unclaimed == 0 : unclaimed_total_ == 0) return Claim{};
    return dock_.claim(rl_consumers::kRollout, options);
  };
  claimer.start = [this, &s](Claim claim) {
    const int target = claim.rows.front().info.target;
    if (target >= 0) instances_[static_cast<size_t>(target)].unclaimed -= 1;  // -1: a cut unit
    unclaimed_total_ -= 1;
    if (auto open = open_groups_.find(claim.rows.front().info.group_id); open != open_groups_.end()) {
      open->second.state = GroupState::kGenerating;
    }
    const std::vector<int64_t>& lengths = group_lengths_.at(claim.rows.front().info.group_id);
    std::vector<int64_t> unit_lengths, generated;
    int64_t version = s.version;
    bool resumes = false;
    for (const ClaimedRow& row : claim.rows) {
      unit_lengths.push_back(lengths[static_cast<size_t>(row_sample_.at(row.id))]);
      auto cut = row_progress_.find(row.id);
      generated.push_back(cut == row_progress_.end() ? 0 : cut->second.first);
      if (cut == row_progress_.end()) continue;
      resumes = true;
      version = std::min(version, cut->second.second);  // staleness from the oldest token
      row_progress_.erase(cut);
    }
    const int64_t group = claim.rows.front().info.group_id;
    std::vector<int64_t> samples;
    for (const ClaimedRow& row : claim.rows) samples.push_back(row_sample_.at(row.id));
    if (resumes) {
      s.engine->resume_unit(claim.lease, spec_.lengths.prompt_tokens, unit_lengths, generated,
                            version, group, samples);
      resumed_units_ += 1;
    } else {
      s.engine->add_unit(claim.lease, spec_.lengths.prompt_tokens, unit_lengths, s.version, group,
                         samples);
    }
    rollout_leases_.emplace(claim.lease, std::move(claim));
    return true;
  };
  const RolloutClaimRound round = claim_rollout_units(
      i, rollout_claim_options(spec_.dispatch_chunk, spec_.n, s.version, kLeaseSeconds),
      /*steal_wait_s=*/0.0, claimer);
  s.stolen += round.stolen;
  return round.started;
}

void Simulation::boundary(int i) {
  InstanceState& s = instances_[static_cast<size_t>(i)];
  s.pending = false;
  s.just_loaded = s.loading;
  s.loading = false;
  if (published_version_ > s.version && spec_.weight_switch == WeightSwitch::kDrain &&
      !s.engine->idle()) {
    // Drain: the running units end on the old weights; nothing new joins meanwhile.
    s.engine->start_segment(now());
    s.pending = true;
    s.generation += 1;
    schedule(s.engine->segment_end(), EventKind::kInstance, i, s.generation);
    return;
  }
  if (published_version_ > s.version) {
    // RolloutWorker::refresh_weights: the newest set, at a step boundary.
    const double load = costs_.weight_fetch_s();
    s.version = published_version_;
    if (load > 0) {
      s.engine->add_busy(load);
      trace_.span(instance_tracks_[static_cast<size_t>(i)], "load weights", at(now()),
                  at(now() + load), {{"version", s.version}});
      s.pending = s.loading = true;
      s.generation += 1;
      schedule(now() + load, EventKind::kInstance, i, s.generation);
      return;
    }
  }
  const bool cut = s.just_loaded && after_load(i);
  s.just_loaded = false;
  if (!cut) claim_units(i);
  const double duration = s.engine->start_segment(now());
  const double tool_return = s.engine->next_tool_return();
  if (s.engine->in_segment()) {
    s.pending = true;
    s.generation += 1;
    // A tool call that returns mid-segment joins at the next step boundary.
    const double end = tool_return < now() + duration ? s.engine->cut_segment(tool_return)
                                                      : now() + duration;
    schedule(end, EventKind::kInstance, i, s.generation);
  } else if (std::isfinite(tool_return)) {
    s.pending = true;  // idle until the first tool call returns
    s.generation += 1;
    schedule(tool_return, EventKind::kInstance, i, s.generation);
  }
}

bool Simulation::peer_is_idle(int i) const {
  for (size_t j = 0; j < instances_.size(); ++j) {
    if (static_cast<int>(j) != i && instances_[j].engine->idle()) return true;
  }
  return false;
}

void Simulation::abort_stragglers() {
  // Admission::abort_stragglers: once update i's batch is whole, a group admitted below
  // i + 1 - eta that it did not take is aborted as soon as nobody holds it (queued, or
  // scored and waiting); one being generated or scored finishes first.
  if (spec_.over_sample_groups == 0 || whole_through_ < 0) return;
  int64_t aborted = 0;
  for (auto it = open_groups_.begin(); it != open_groups_.end();) {
    const OpenGroup& open = it->second;
    const int64_t group = it->first;
    const bool unheld = open.state == GroupState::kQueued || ready_set_.count(group) > 0;
    if (!unheld || !is_straggler(open.version, whole_through_ + 1, spec_.eta)) {
      ++it;
      continue;
    }
    dock_.discard(open.rows, /*unleased_only=*/true);
    if (open.state == GroupState::kQueued) {
      if (open.target >= 0) instances_[static_cast<size_t>(open.target)].unclaimed -= 1;
      unclaimed_total_ -= 1;
      for (RowId row : open.rows) {  // a cut unit's progress is lost with it
        if (auto cut = row_progress_.find(row); cut != row_progress_.end()) {
          aborted_tokens_ += cut->second.first;
          row_progress_.erase(cut);
        }
      }
    } else {
      ready_set_.erase(group);
      ready_groups_ -= 1;
      for (int64_t tokens : group_lengths_.at(group)) aborted_tokens_ += tokens;
    }
    it = open_groups_.erase(it);
    aborted += 1;
  }
  aborted_groups_ += aborted;
  if (aborted > 0) admitted_at_version_ = -1;  // room freed: the next admission refills it
}

bool Simulation::after_load(int i) {
  InstanceState& s = instances_[static_cast<size_t>(i)];
  if (spec_.weight_switch == WeightSwitch::kRecompute) s.engine->recompute_running();
  if (!spec_.partial_rollout || !peer_is_idle(i)) return false;
  // Units that ran under older weights and hold a long enough unfinished sample.
  const auto cut = s.engine->take_units([this, &s](int64_t, int64_t version, int64_t longest) {
    return version < s.version && longest >= spec_.partial_rollout_min_tokens;
  });
  for (const SimulatedUnitProgress& unit : cut) {
    auto it = rollout_leases_.find(unit.unit);
    const Claim& claim = it->second;
    std::vector<RowInfo> infos;
    for (size_t r = 0; r < claim.rows.size(); ++r) {
      row_progress_[claim.rows[r].id] = {unit.generated[r], unit.version};
      RowInfo info = claim.rows[r].info;
      info.version = unit.version;
      infos.push_back(info);
      cut_tokens_ += unit.generated[r];
    }
    dock_.update_info(claim.row_ids(), infos);
    dock_.release(unit.unit);  // back to the pool without a target
    if (auto open = open_groups_.find(claim.rows.front().info.group_id); open != open_groups_.end()) {
      open->second.state = GroupState::kQueued;
      open->second.target = -1;
    }
    rollout_leases_.erase(it);
    unclaimed_total_ += 1;
    cut_units_ += 1;
  }
  if (cut.empty()) return false;
  for (size_t j = 0; j < instances_.size(); ++j) {
    if (static_cast<int>(j) != i && !instances_[j].pending) wake(static_cast<int>(j));
  }
  return true;
}

void Simulation::instance_event(int i, int64_t tag) {
  InstanceState& s = instances_[static_cast<size_t>(i)];
  if (tag != s.generation) return;  // cut or replaced
  if (!s.loading) {
    std::vector<SimulatedUnitDone> done = s.engine->finish_segment();
    for (const SimulatedUnitDone& unit : done) unit_done(i, unit);
  }
  boundary(i);
}

void Simulation::unit_done(int i, const SimulatedUnitDone& done) {
  auto it = rollout_leases_.find(done.unit);
  const Claim claim = std::move(it->second);
  rollout_leases_.erase(it);
  const int64_t group = claim.rows.front().info.group_id;
  if (auto open = open_groups_.find(group); open != open_groups_.end()) {
    open->second.state = GroupState::kFinished;
  }
  std::vector<RowId> rows;
  std::vector<RowInfo> infos;
  for (size_t r = 0; r < claim.rows.size(); ++r) {
    rows.push_back(claim.rows[r].id);
    RowInfo info = claim.rows[r].info;
    info.tokens = done.lengths[r];
    info.version = done.version;
    infos.push_back(info);
    dispatcher_.on_completed(i, spec_.lengths.prompt_tokens, done.lengths[r]);
  }
  // As a rollout instance does: the response with the rows' true infos, in one call.
  dock_.publish(rows,
                {rl_columns::kResponse, rl_columns::kRolloutLogprobs, rl_columns::kRolloutVersions},
                0, infos);
  dock_.ack(claim.lease);
  InstanceState& s = instances_[static_cast<size_t>(i)];
  const double start = std::max(now(), s.reward_free_at);
  s.reward_free_at = start + spec_.reward_s_per_sample * static_cast<double>(rows.size());
  const int64_t tag = next_reward_tag_++;
  reward_queue_[tag] = {claim.rows.front().info.group_id, static_cast<int64_t>(rows.size())};
  trace_.span(instance_tracks_[static_cast<size_t>(i)], "reward", at(start), at(s.reward_free_at),
              {{"rows", rows.size()}});
  schedule(s.reward_free_at, EventKind::kReward, i, tag);
}

void Simulation::reward_done(int64_t tag) {
  const auto [group, rows] = reward_queue_.at(tag);
  reward_queue_.erase(tag);
  ClaimOptions options;
  options.max_rows = rows;
  options.min_rows = 1;
  options.groups = {group};
  options.lease_s = kLeaseSeconds;
  const Claim claim = dock_.claim(rl_consumers::kReward, options);
  std::vector<RowId> ids;
  for (const ClaimedRow& row : claim.rows) ids.push_back(row.id);
  dock_.publish(ids, {rl_columns::kScores, rl_columns::kVerifierScore}, 0);
  dock_.ack(claim.lease);
  int64_t& scored = scored_rows_[group];
  scored += static_cast<int64_t>(ids.size());
  if (scored == spec_.n) {
    scored_rows_.erase(group);
    ready_groups_ += 1;
    if (spec_.over_sample_groups > 0) {
      ready_set_.insert(group);
      abort_stragglers();  // a straggler nobody holds any more leaves (and frees room)
    }
    scored_groups_ += 1;
    if (waiting_) trainer_try();
  }
}

}  // namespace aspen::sim
