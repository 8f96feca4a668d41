#include "aspen/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulation_internal.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

DockControllerOptions dock_options(const TimeSource* clock) {
  DockControllerOptions options;
  options.capacity_rows = kDockCapacityRows;
  options.clock = clock;
  return options;
}

}  // namespace

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
  // The pipeline (pp > 1) flushes at every optimizer step: the epoch's mini-batches.
  const double train = costs_.train_s(tokens, pairs, spec_.optimizer_steps / spec_.epochs);
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

nlohmann::json run_simulation(const SimulationSpec& spec) {
  Simulation simulation(spec);
  return simulation.run();
}

}  // namespace aspen::sim
