#include "aspen/sim/simulator.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "aspen/dock/controller.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rollout_claims.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/report/bubble_accounting.h"
#include "aspen/report/trace_writer.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulated_instance.h"
#include "aspen/util/clock.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

// No failures are simulated, so no lease may expire: every lease outlives the run.
constexpr double kLeaseSeconds = 1e9;
constexpr int64_t kDockCapacityRows = int64_t{1} << 24;

// kAdmit: the admitter's next poll (after an abort freed room), outside the caller's turn.
enum class EventKind { kInstance, kReward, kTrainer, kAdmit };

struct Event {
  double time = 0;
  int64_t order = 0;  // FIFO among equal times: the simulation is deterministic
  EventKind kind = EventKind::kInstance;
  int index = 0;
  int64_t tag = 0;
  bool operator>(const Event& other) const {
    return time != other.time ? time > other.time : order > other.order;
  }
};

struct InstanceState {
  std::unique_ptr<SimulatedInstance> engine;
  int64_t version = 0;       // weights it runs
  int64_t generation = 0;    // of its pending event; older events are stale
  bool pending = false;      // a segment or a weight load is in flight
  bool loading = false;
  bool just_loaded = false;  // the next boundary is the first on newly loaded weights
  int64_t unclaimed = 0;     // units dispatched to it and not claimed yet (a wake-up hint)
  double reward_free_at = 0;
  double busy_at_iteration_start = 0;
  int64_t stolen = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimulationSpec& spec);
  nlohmann::json run();

 private:
  double now() const { return clock_.seconds(); }
  void schedule(double time, EventKind kind, int index, int64_t tag);
  TimeSource::TimePoint at(double seconds) const {
    return trace_.origin() + std::chrono::duration_cast<TimeSource::TimePoint::duration>(
                                 std::chrono::duration<double>(seconds));
  }
  // Trainer.
  void admit();
  void wait_mark();
  void trainer_try();
  void start_part(const Claim& batch);
  void trainer_done();
  void finish_iteration();
  // Instances and reward.
  bool has_room(const InstanceState& instance) const;
  void wake(int i);
  void boundary(int i);
  bool after_load(int i);  // recompute and cuts at a weight switch; true: claim nothing now

  bool peer_is_idle(int i) const;
  void abort_stragglers();  // the unheld groups the whole batches left behind
  int64_t claim_units(int i);
  void instance_event(int i, int64_t tag);
  void unit_done(int i, const SimulatedUnitDone& done);
  void reward_done(int64_t tag);  // a unit's rows scored (tag: reward_queue_)

  const SimulationSpec& spec_;
  CostModel costs_;
  ManualClock clock_;
  DockController dock_;
  Dispatcher dispatcher_;
  BubbleAccounting bubbles_;
  TraceWriter trace_;
  int trainer_track_ = 0;
  std::vector<int> instance_tracks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t order_ = 0;
  std::vector<InstanceState> instances_;
  int64_t unclaimed_total_ = 0;

  // The workload's truth (what a real rollout would sample), by group and by row.
  std::unordered_map<int64_t, std::vector<int64_t>> group_lengths_;
  std::unordered_map<RowId, int64_t> row_sample_;  // row -> sample index in its group
  std::unordered_map<int64_t, Claim> rollout_leases_;
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> reward_queue_;  // tag -> group, rows
  std::unordered_map<int64_t, int64_t> scored_rows_;              // group -> rows scored
  // Partial rollouts: a cut row's tokens so far and the version of its oldest token.
  std::unordered_map<RowId, std::pair<int64_t, int64_t>> row_progress_;
  int64_t cut_units_ = 0, cut_tokens_ = 0, resumed_units_ = 0;
  int64_t aborted_groups_ = 0, aborted_tokens_ = 0;
  // Over-sampling: the groups not yet in a batch (the trainer's Admission keeps the
  // same).
  enum class GroupState { kQueued, kGenerating, kFinished };
  struct OpenGroup {
    int64_t version = 0;  // admitted at
    std::vector<RowId> rows;
    int target = -1;  // while queued
    GroupState state = GroupState::kQueued;
  };
  std::map<int64_t, OpenGroup> open_groups_;
  std::unordered_set<int64_t> ready_set_;  // scored, not in a batch (over-sampling only)
  int64_t whole_through_ = -1;             // the last update whose batch is whole
  int64_t next_group_ = 0;
  int64_t next_reward_tag_ = 0;

  // Trainer state.
  int64_t version_ = 0;            // updates done
  int64_t published_version_ = 0;  // weights on the board
  int64_t trained_groups_ = 0;     // consumed by finished updates
  int64_t ready_groups_ = 0;       // scored, not yet in a batch (a wake-up hint)
  int64_t scored_groups_ = 0;      // scored so far
  // A failed batch claim with P pending required rows cannot succeed before P / n more
  // groups are scored: the next claim waits for that many (a necessary condition).
  int64_t claim_after_scored_ = 0;
  // The admission bound moves only with the published version, the trained groups and
  // the discarded ones (over-sampling's aborts reset the marks): admission is
  // re-evaluated when one changed.
  int64_t admitted_at_version_ = -1, admitted_at_trained_ = -1;
  bool waiting_ = true;
  bool sorting_ = false;  // the wait's current kind: ready groups held by the window
  double wait_mark_ = 0;
  double idle_ = 0, sorting_s_ = 0;
  int64_t batch_groups_in_ = 0;  // groups of the current update claimed so far
  std::vector<Claim> batch_leases_;
  double part_start_ = 0;
  const char* part_name_ = "update";
  bool part_completes_batch_ = false;
  double trainer_busy_ = 0;
  int64_t iteration_ = 0;
  double iteration_start_ = 0;
  int64_t iteration_tokens_ = 0, iteration_rows_ = 0;
  // Totals.
  int64_t trained_tokens_ = 0, trained_rows_ = 0;
  nlohmann::json iterations_ = nlohmann::json::array();
  std::map<std::string, double> bubble_weighted_;
  std::map<std::string, int64_t> staleness_;
};

DockControllerOptions dock_options(const TimeSource* clock) {
  DockControllerOptions options;
  options.capacity_rows = kDockCapacityRows;
  options.clock = clock;
  return options;
}

Simulation::Simulation(const SimulationSpec& spec)
    : spec_(spec),
      costs_(spec.model, spec.device, spec.cluster, spec.overheads),
      dock_(make_rl_schema(RlSchemaOptions{}), dock_options(&clock_)),
      dispatcher_(spec.dispatch, spec.cluster.instances),
      bubbles_(spec.cluster.instances, 1),
      trace_(spec.trace_path, 1, "aspen simulate") {
  check_input(spec.n >= 1 && spec.prompts_per_iteration >= 1 && spec.iterations >= 1,
              "n " + std::to_string(spec.n) + ", prompts " +
                  std::to_string(spec.prompts_per_iteration) + ", iterations " +
                  std::to_string(spec.iterations),
              "simulated run", "rollout.n, rollout.prompts_per_iteration, train.iterations >= 1");
  check_input(spec.dispatch_chunk >= 1 && spec.n % spec.dispatch_chunk == 0,
              "dispatch chunk " + std::to_string(spec.dispatch_chunk), "pipeline.dispatch_chunk",
              "must divide rollout.n");
  check_input(spec.over_sample_groups == 0 || spec.dispatch_chunk == spec.n,
              "dispatch chunk " + std::to_string(spec.dispatch_chunk) + " with over-sampling",
              "pipeline.dispatch_chunk", "an abort drops whole groups: dispatch whole groups");
  spec.lengths.validate();
  spec.tools.validate();
  dock_.register_warehouse("");
  trainer_track_ = trace_.track("trainer");
  for (int i = 0; i < spec.cluster.instances; ++i) {
    InstanceState state;
    state.engine = std::make_unique<SimulatedInstance>(costs_, spec.max_num_seqs,
                                                       spec.max_num_batched_tokens, &spec_.tools);
    instances_.push_back(std::move(state));
    instance_tracks_.push_back(trace_.track("rollout instance " + std::to_string(i)));
  }
}

void Simulation::schedule(double time, EventKind kind, int index, int64_t tag) {
  events_.push(Event{time, order_++, kind, index, tag});
}

bool Simulation::has_room(const InstanceState& instance) const {
  return has_room_for_unit(instance.engine->queue_state(), spec_.dispatch_chunk,
                           spec_.max_num_seqs);
}

void Simulation::admit() {
  for (int i = 0; i < spec_.cluster.instances; ++i) {
    const InstanceCounters& c = instances_[static_cast<size_t>(i)].engine->counters();
    // As the iteration engine reports throughput; an instance busy only loading weights
    // (no token scheduled yet: more instances than work) has none to report.
    if (c.busy_seconds > 0.5 && c.scheduled_tokens > 0) {
      dispatcher_.on_throughput(i, static_cast<double>(c.scheduled_tokens) / c.busy_seconds);
    }
  }
  if (admitted_at_version_ == published_version_ && admitted_at_trained_ == trained_groups_) return;
  admitted_at_version_ = published_version_;
  admitted_at_trained_ = trained_groups_;
  const int64_t room = admissible_groups(published_version_, spec_.eta,
                                         spec_.prompts_per_iteration, trained_groups_,
                                         dock_.backlog(rl_consumers::kBatch), spec_.n,
                                         spec_.over_sample_groups);
  std::vector<bool> woken(instances_.size(), false);
  const GroupShape shape{spec_.dispatch_chunk, spec_.lengths.prompt_tokens,
                         spec_.lengths.max_tokens};
  for (int64_t g = 0; g < room; ++g) {
    const int64_t group = next_group_++;
    group_lengths_[group] = spec_.lengths.group_lengths(group, spec_.n);
    std::vector<RowInfo> infos;
    std::vector<int> targets;
    for (int64_t first = 0; first < spec_.n; first += spec_.dispatch_chunk) {
      std::vector<QueueState> states;
      for (const InstanceState& s : instances_) states.push_back(s.engine->queue_state());
      const int target = dispatcher_.choose(states, shape);
      dispatcher_.on_dispatched(target, shape);
      targets.push_back(target);
      for (int64_t j = 0; j < spec_.dispatch_chunk; ++j) {
        RowInfo info;
        info.group_id = group;
        info.group_size = static_cast<int32_t>(spec_.n);
        info.version = published_version_;
        info.target = target;
        infos.push_back(info);
      }
    }
    const std::vector<RowId> rows = dock_.allocate(infos, 0.0);
    for (size_t r = 0; r < rows.size(); ++r) row_sample_[rows[r]] = static_cast<int64_t>(r);
    if (spec_.over_sample_groups > 0) {
      open_groups_[group] = OpenGroup{published_version_, rows, targets.front()};
    }
    dock_.publish(rows, {rl_columns::kPrompt, rl_columns::kExample, rl_columns::kSampleIndex}, 0);
    for (int target : targets) {
      instances_[static_cast<size_t>(target)].unclaimed += 1;
      unclaimed_total_ += 1;
      woken[static_cast<size_t>(target)] = true;
    }
  }
  if (room == 0) return;
  // Targets first; then idle instances steal what their targets could not take.
  for (size_t i = 0; i < instances_.size(); ++i) {
    if (woken[i]) wake(static_cast<int>(i));
  }
  for (size_t i = 0; i < instances_.size() && unclaimed_total_ > 0; ++i) {
    if (!instances_[i].pending) wake(static_cast<int>(i));
  }
}

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

void Simulation::wait_mark() {
  const double waited = now() - wait_mark_;
  idle_ += waited;
  if (sorting_) sorting_s_ += waited;
  if (waited > 0) {
    trace_.span(trainer_track_, sorting_ ? "wait (sorting)" : "wait", at(wait_mark_), at(now()));
  }
  wait_mark_ = now();
}

void Simulation::trainer_try() {
  wait_mark();
  admit();
  const int64_t wanted = spec_.prompts_per_iteration - batch_groups_in_;
  const bool whole = !spec_.stream_updates;
  // A claim that cannot succeed is not made: a whole batch needs `wanted` scored groups.
  if (ready_groups_ == 0 || (whole && ready_groups_ < wanted) ||
      scored_groups_ < claim_after_scored_) {
    sorting_ = ready_groups_ > 0;  // what an empty claim would answer: rows left ready
    return;
  }
  const bool abort_stragglers = spec_.over_sample_groups > 0;
  ClaimOptions options =
      batch_claim_options(iteration_, spec_.eta, wanted, spec_.n, whole, abort_stragglers);
  options.lease_s = kLeaseSeconds;
  Claim batch = dock_.claim(rl_consumers::kBatch, options);
  if (batch.empty()) {
    sorting_ = batch.ready_rows_left > 0;  // the window holds ready groups back
    claim_after_scored_ = scored_groups_ + batch.pending_required_rows / spec_.n;
    return;
  }
  waiting_ = false;
  start_part(batch);
}

void Simulation::start_part(const Claim& batch) {
  std::vector<int64_t> groups;
  double tokens = 0, pairs = 0;
  int64_t response_tokens = 0;
  for (const ClaimedRow& row : batch.rows) {
    if (groups.empty() || groups.back() != row.info.group_id) groups.push_back(row.info.group_id);
    // Observations are in the trained context too (masked out of the loss).
    const int64_t calls = spec_.tools.multi_turn()
                              ? static_cast<int64_t>(spec_.tools.turn_ends(row.info.tokens).size()) - 1
                              : 0;
    const auto length = static_cast<double>(spec_.lengths.prompt_tokens + row.info.tokens +
                                            calls * spec_.tools.observation_tokens);
    tokens += length;
    pairs += causal_pairs(length);
    response_tokens += row.info.tokens;
    bubbles_.add_staleness(version_ - row.info.version, 1);
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  for (int64_t group : groups) {
    open_groups_.erase(group);
    ready_set_.erase(group);
  }
  const auto group_count = static_cast<int64_t>(groups.size());
  ready_groups_ -= group_count;
  batch_groups_in_ += group_count;
  iteration_tokens_ += response_tokens;
  iteration_rows_ += static_cast<int64_t>(batch.rows.size());
  batch_leases_.push_back(batch);
  // The trainer's stages run in memory on the batch's rows (trainer_stages.h): they
  // cost time, not dock calls.
  // Their time.
  double seconds = 0;
  const double forward = costs_.forward_s(tokens, pairs);
  if (spec_.reference) seconds += forward;
  if (spec_.recompute_old_logprobs) seconds += forward;
  if (spec_.critic) seconds += forward;
  const double train = costs_.train_s(tokens, pairs);
  seconds += static_cast<double>(spec_.epochs) * train * (spec_.critic ? 2.0 : 1.0);
  part_completes_batch_ = batch_groups_in_ >= spec_.prompts_per_iteration;
  // Over-sampling: update i's batch is fixed, so what it left behind is known now.
  if (part_completes_batch_ && spec_.over_sample_groups > 0) {
    whole_through_ = iteration_;
    abort_stragglers();
  }
  part_name_ = spec_.stream_updates ? "accumulate" : "update";
  if (part_completes_batch_) {
    seconds += static_cast<double>(spec_.optimizer_steps) * costs_.optimizer_step_s() *
                   (spec_.critic ? 2.0 : 1.0);
    if ((version_ + 1) % spec_.sync_every == 0) seconds += costs_.publish_s();
  }
  part_start_ = now();
  trainer_busy_ += seconds;
  schedule(now() + seconds, EventKind::kTrainer, 0, 0);
}

void Simulation::trainer_done() {
  trace_.span(trainer_track_, part_name_, at(part_start_), at(now()));
  if (!part_completes_batch_) {
    waiting_ = true;
    wait_mark_ = now();
    trainer_try();
    return;
  }
  for (const Claim& claim : batch_leases_) dock_.ack(claim.lease);
  batch_leases_.clear();
  version_ += 1;
  trained_groups_ += batch_groups_in_;
  batch_groups_in_ = 0;
  if (version_ % spec_.sync_every == 0) {
    published_version_ = version_;
    for (size_t i = 0; i < instances_.size(); ++i) {
      const InstanceState& s = instances_[i];
      // Idle, or waiting only for tool calls: the new weights load now.
      if (!s.pending || (!s.loading && !s.engine->in_segment())) wake(static_cast<int>(i));
    }
  }
  finish_iteration();
  if (iteration_ < spec_.iterations) {
    waiting_ = true;
    wait_mark_ = now();
    trainer_try();
  }
}

void Simulation::finish_iteration() {
  const double wall = now() - iteration_start_;
  std::vector<double> busy;
  double rollout_idle = 0;
  for (InstanceState& s : instances_) {
    const double b = s.engine->counters().busy_seconds - s.busy_at_iteration_start;
    s.busy_at_iteration_start = s.engine->counters().busy_seconds;
    busy.push_back(b);
    rollout_idle += std::max(0.0, wall - b);
  }
  bubbles_.add_phase(busy);
  bubbles_.add_idle(BubbleRole::kRollout, rollout_idle);
  bubbles_.add_idle(BubbleRole::kTrainer, idle_);
  bubbles_.add_sorting_wait(sorting_s_);
  const nlohmann::json bubbles = bubbles_.to_json(wall);
  bubbles_.reset();
  for (const auto& [key, value] : bubbles.items()) {
    if (value.is_number()) bubble_weighted_[key] += value.get<double>() * wall;
  }
  for (const auto& [behind, rows] : bubbles.at("staleness_histogram").items()) {
    staleness_[behind] += rows.get<int64_t>();
  }
  iterations_.push_back({{"iteration", iteration_ + 1},
                         {"seconds", wall},
                         {"trained_tokens", iteration_tokens_},
                         {"trained_rows", iteration_rows_},
                         {"bubbles", bubbles}});
  trained_tokens_ += iteration_tokens_;
  trained_rows_ += iteration_rows_;
  iteration_tokens_ = iteration_rows_ = 0;
  idle_ = sorting_s_ = 0;
  iteration_start_ = now();
  iteration_ += 1;
}

nlohmann::json Simulation::run() {
  waiting_ = true;
  trainer_try();
  while (iteration_ < spec_.iterations) {
    check_input(!events_.empty(), "the simulated run stalled at iteration " +
                                      std::to_string(iteration_ + 1),
                "simulated run", "an internal error of the simulator");
    const Event event = events_.top();
    events_.pop();
    clock_.advance_to(event.time);
    switch (event.kind) {
      case EventKind::kInstance: instance_event(event.index, event.tag); break;
      case EventKind::kReward: reward_done(event.tag); break;
      case EventKind::kTrainer: trainer_done(); break;
      case EventKind::kAdmit:
        if (waiting_) admit();  // the admitter polls while the trainer waits for a batch
        break;
    }
  }
  const double wall = std::max(now(), 1e-12);
  nlohmann::json bubbles = nlohmann::json::object();
  for (const auto& [key, weighted] : bubble_weighted_) bubbles[key] = weighted / wall;
  bubbles["staleness_histogram"] = staleness_;
  double rollout_busy = 0;
  int64_t steps = 0, tokens = 0, preemptions = 0, stolen = 0, tool_calls = 0;
  double tool_wait = 0;
  for (const InstanceState& s : instances_) {
    tool_calls += s.engine->counters().tool_calls;
    tool_wait += s.engine->counters().tool_wait_seconds;
    rollout_busy += s.engine->counters().busy_seconds;
    steps += s.engine->counters().steps;
    tokens += s.engine->counters().scheduled_tokens;
    preemptions += s.engine->counters().preemptions;
    stolen += s.stolen;
  }
  bubbles["tool_wait"] = tool_wait / (static_cast<double>(spec_.cluster.instances) * wall);
  const ClusterShape& c = spec_.cluster;
  const double rollout_device_s = rollout_busy * c.rollout_tp;
  const double train_device_s = trainer_busy_ * c.train_devices();
  nlohmann::json utilisation = {
      {"rollout", rollout_busy / (c.instances * wall)},
      {"train", trainer_busy_ / wall},
      {"devices", (rollout_device_s + train_device_s) / (c.devices() * wall)}};
  trace_.flush();
  const nlohmann::json metrics = dock_.metrics();
  nlohmann::json dock_metrics;
  for (const char* key : {"rows_allocated", "rows_retired", "live_rows", "open_leases", "leases_expired"}) {
    dock_metrics[key] = metrics.at(key);
  }
  return {{"effective_tps", static_cast<double>(trained_tokens_) / wall},
          {"samples_per_s", static_cast<double>(trained_rows_) / wall},
          {"seconds_per_step", wall / static_cast<double>(spec_.iterations)},
          {"wall_seconds", wall},
          {"trained_tokens", trained_tokens_},
          {"trained_rows", trained_rows_},
          {"bubbles", bubbles},
          {"utilisation", utilisation},
          {"rollout", {{"steps", steps},
                       {"scheduled_tokens", tokens},
                       {"mean_batch", steps > 0 ? static_cast<double>(tokens) / steps : 0.0},
                       {"preemptions", preemptions},
                       {"stolen_units", stolen},
                       {"cut_units", cut_units_},
                       {"cut_tokens", cut_tokens_},
                       {"resumed_units", resumed_units_},
                       {"aborted_groups", aborted_groups_},
                       {"aborted_tokens", aborted_tokens_},
                       {"tool_calls", tool_calls},
                       {"kv_capacity_tokens", costs_.kv_capacity_tokens()}}},
          {"devices", c.devices()},
          {"dock", dock_metrics},
          {"iterations", iterations_}};
}

}  // namespace

nlohmann::json run_simulation(const SimulationSpec& spec) {
  Simulation simulation(spec);
  return simulation.run();
}

}  // namespace aspen::sim
