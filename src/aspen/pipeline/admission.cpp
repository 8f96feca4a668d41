#include "aspen/pipeline/admission.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/report/bubble_accounting.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"

namespace aspen::pipeline {

Admission::Admission(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                     const EngineLayout& layout, TraceWriter* trace, int track)
    : config_(config),
      setup_(setup),
      dock_(dock),
      layout_(layout),
      trace_(trace),
      track_(track),
      eta_(staleness_eta(config)),
      batch_groups_(config.rollout.prompts_per_iteration),
      prompts_(static_cast<int64_t>(setup.train_examples.size()), config.train.seed),
      dispatcher_(config.pipeline.dispatch, layout.instances),
      instances_(static_cast<size_t>(layout.instances)),
      extra_groups_(over_sample_groups(config)) {}

void Admission::refresh_instances() {
  const auto entries = dock_.statuses(kInstanceStatusPrefix);
  for (const auto& [key, entry] : entries) {
    const InstanceStatus status = decode_instance_status(entry.value);
    check_input(status.instance >= 0 && status.instance < layout_.instances,
                "unknown instance " + std::to_string(status.instance), "status board");
    InstanceView& view = instances_[static_cast<size_t>(status.instance)];
    if (view.seen) {
      // Completion reports for the dispatcher: the new finished samples at their mean size.
      const int64_t done = status.completed_samples - view.status.completed_samples;
      for (int64_t s = 0; s < done; ++s) {
        dispatcher_.on_completed(
            status.instance,
            (status.completed_prompt_tokens - view.status.completed_prompt_tokens) / done,
            (status.completed_response_tokens - view.status.completed_response_tokens) / done);
      }
    } else {
      view.busy_at_iteration_start = status.busy_seconds;
      view.steps_at_iteration_start = status.steps;
      view.tokens_at_iteration_start = status.scheduled_tokens;
    }
    if (status.busy_seconds > 0.5 && status.scheduled_tokens > 0) {
      dispatcher_.on_throughput(status.instance,
                                static_cast<double>(status.scheduled_tokens) / status.busy_seconds);
    }
    view.status = status;
    view.seen = true;
    view.age_s = entry.age_s;
    if (!status.exited) status_age_max_s_ = std::max(status_age_max_s_, entry.age_s);
  }
  // Failure: silent for instance_timeout_s (never seen: counted from the start, with
  // room for loading the model), or gone while the run goes on.
  const double timeout = config_.pipeline.instance_timeout_s;
  int alive = 0;
  for (size_t i = 0; i < instances_.size(); ++i) {
    InstanceView& view = instances_[i];
    if (view.failed) continue;
    const double silent = view.seen ? view.age_s : seconds_since(started_) - 4 * timeout;
    if (silent <= timeout && !view.status.exited) {
      ++alive;
      continue;
    }
    const int rank = layout_.instance_ranks[i].front();
    const std::string what =
        "rollout instance " + std::to_string(i) + " on rank " + std::to_string(rank) +
        (view.status.exited
             ? " left the run"
             : " has not reported for " + std::to_string(static_cast<int>(silent)) + " s");
    check_input(config_.pipeline.on_instance_failure != InstanceFailurePolicy::kStop,
                what + "; stopping the run", "pipeline.on_instance_failure",
                "set it to regenerate to continue on the other instances");
    view.failed = true;
    // Its undispatched groups go to any instance now; the ones it held come back when
    // their leases run out.
    const int64_t moved = dock_.retarget(static_cast<int32_t>(i), -1);
    log_warn(what, "; its groups are regenerated elsewhere (", moved, " rows re-dispatched now)");
  }
  check_input(alive > 0, "every rollout instance has failed", "pipeline.on_instance_failure");
}

int Admission::choose_instance(const GroupShape& shape) {
  // A failed instance looks infinitely busy; round robin skips it explicitly.
  std::vector<QueueState> states;
  for (const InstanceView& view : instances_) {
    QueueState state = view.status.queue;
    if (view.failed) {
      state.running = state.waiting = std::numeric_limits<int32_t>::max();
      state.outstanding_tokens = std::numeric_limits<int32_t>::max();
    }
    states.push_back(state);
  }
  for (int attempt = 0; attempt <= layout_.instances; ++attempt) {
    const int chosen = dispatcher_.choose(states, shape);
    if (!instances_[static_cast<size_t>(chosen)].failed) return chosen;
  }
  throw Error("no live rollout instance to dispatch to", "pipeline.on_instance_failure");
}

void Admission::admit_group(const PromptGroup& group, int64_t version_bound) {
  const GenerationRequest request = group_request(config_, setup_, group);
  const int64_t n = config_.rollout.n;
  const int64_t chunk = dispatch_chunk(config_, layout_.instances);
  // Each chunk of the group's samples (the whole group by default) goes to the
  // instance the dispatcher picks for it.
  const GroupShape shape{chunk, static_cast<int64_t>(request.prompt.size()),
                         config_.rollout.max_tokens};
  std::vector<RowInfo> infos;
  ColumnData prompt{rl_columns::kPrompt, {}};
  ColumnData example{rl_columns::kExample, {}};
  ColumnData sample{rl_columns::kSampleIndex, {}};
  const std::vector<int64_t> tokens(request.prompt.begin(), request.prompt.end());
  std::vector<int> targets;
  for (int64_t first = 0; first < n; first += chunk) {
    const int instance = choose_instance(shape);
    dispatcher_.on_dispatched(instance, shape);
    targets.push_back(instance);
    for (int64_t j = first; j < first + chunk; ++j) {
      RowInfo info;
      info.group_id = group.group_id;
      info.group_size = static_cast<int32_t>(n);
      info.version = version_bound;
      info.target = instance;
      infos.push_back(info);
      prompt.values.push_back(torch::tensor(tokens, torch::kInt64));
      example.values.push_back(torch::tensor({group.example}, torch::kInt64));
      sample.values.push_back(torch::tensor({j}, torch::kInt64));
    }
  }
  std::vector<ColumnData> columns = {prompt, example, sample};
  const RlSchemaOptions schema = rl_schema_options(dock_.schema());
  if (schema.with_partial) {
    // No output yet: the rollout consumer reads these from every row it claims.
    for (ColumnData& column : empty_partial_columns(infos.size(), schema.with_routing)) {
      columns.push_back(std::move(column));
    }
  }
  const std::vector<RowId> rows = dock_.put(infos, columns);
  if (extra_groups_ > 0) open_[group.group_id] = OpenGroup{version_bound, rows};
  if (trace_ != nullptr) {
    trace_->instant(track_, "admit", {{"group", group.group_id}, {"instances", targets}});
  }
}

void Admission::admit() {
  refresh_instances();
  // Groups admitted and not yet given to a batch are the controller's backlog of the
  // batch consumer; discarded ones (no instance could serve them, or dropped by
  // dynamic sampling) left it and free their slot (staleness_window.h).
  abort_stragglers();  // a straggler's holder may have let go of it since the last poll
  const int64_t room = admissible_groups(published_version_, eta_, batch_groups_,
                                         consumed_groups_ - refilled_groups_,
                                         dock_.backlog(rl_consumers::kBatch), config_.rollout.n,
                                         extra_groups_);
  for (int64_t i = 0; i < room; ++i) admit_group(prompts_.next(1).front(), published_version_);
}

void Admission::consume(const std::vector<int64_t>& groups, bool refill) {
  for (int64_t group : groups) {
    prompts_.close(group);
    open_.erase(group);
  }
  const auto count = static_cast<int64_t>(groups.size());
  consumed_groups_ += count;
  if (refill) refilled_groups_ += count;
}

void Admission::batch_whole(int64_t index, const std::vector<int64_t>& groups) {
  if (extra_groups_ == 0) return;
  for (int64_t group : groups) open_.erase(group);  // trained by this update
  whole_through_ = std::max(whole_through_, index);
  abort_stragglers();
}

void Admission::abort_stragglers() {
  if (extra_groups_ == 0 || whole_through_ < 0) return;
  std::vector<RowId> rows;
  for (const auto& [group, open] : open_) {
    if (!is_straggler(open.version, whole_through_ + 1, eta_)) continue;
    rows.insert(rows.end(), open.rows.begin(), open.rows.end());
  }
  if (rows.empty()) return;
  // Only rows nobody holds: an instance or a reward working on one finishes it, and
  // the next poll takes it (no producer ever writes a row that is gone).
  std::set<RowId> gone;
  for (const RetiredRow& row : dock_.discard(rows, /*unleased_only=*/true)) gone.insert(row.id);
  if (gone.empty()) return;
  for (auto it = open_.begin(); it != open_.end();) {
    std::vector<RowId>& live = it->second.rows;
    const size_t before = live.size();
    live.erase(std::remove_if(live.begin(), live.end(), [&](RowId id) { return gone.count(id) > 0; }),
               live.end());
    if (live.size() == before || !live.empty()) {
      ++it;
      continue;
    }
    // Every row gone: the group is aborted, its prompt closed, its slot refilled.
    prompts_.close(it->first);
    consumed_groups_ += 1;
    refilled_groups_ += 1;
    aborted_groups_ += 1;
    it = open_.erase(it);
  }
  aborted_rows_ += static_cast<int64_t>(gone.size());
}

nlohmann::json Admission::abort_metrics() const {
  return {{"aborted_groups", aborted_groups_}, {"aborted_rows", aborted_rows_}};
}

nlohmann::json Admission::rollout_bubbles(double seconds) {
  BubbleAccounting phase(layout_.instances, layout_.trainers);
  std::vector<double> busy;
  // The instances' work this iteration: what aspen simulate calibrates its step costs on.
  nlohmann::json work = {{"steps", 0}, {"scheduled_tokens", 0}, {"busy_seconds", 0.0}};
  // Trajectories: the share of the instances' time their engines sat idle while
  // trajectories waited on tools or environments (the tool_wait bubble, issue #35).
  double tool_wait = 0.0;
  for (InstanceView& view : instances_) {
    const double b = std::max(0.0, view.status.busy_seconds - view.busy_at_iteration_start);
    work["steps"] = work["steps"].get<int64_t>() + view.status.steps - view.steps_at_iteration_start;
    work["scheduled_tokens"] = work["scheduled_tokens"].get<int64_t>() +
                               view.status.scheduled_tokens - view.tokens_at_iteration_start;
    work["busy_seconds"] = work["busy_seconds"].get<double>() + b;
    view.busy_at_iteration_start = view.status.busy_seconds;
    view.steps_at_iteration_start = view.status.steps;
    view.tokens_at_iteration_start = view.status.scheduled_tokens;
    // An instance's status is a snapshot posted up to status_period_s apart, so the wait
    // it reports at this boundary may include some of the previous iteration's: at
    // most the iteration's seconds are counted per instance (a share stays <= 1).
    tool_wait += std::clamp(view.status.tool_wait_seconds - view.tool_wait_at_iteration_start,
                            0.0, std::max(0.0, seconds));
    view.tool_wait_at_iteration_start = view.status.tool_wait_seconds;
    if (view.failed) continue;
    busy.push_back(b);
    phase.add_idle(BubbleRole::kRollout, std::max(0.0, seconds - b));
  }
  phase.add_phase(busy);
  nlohmann::json bubbles = phase.to_json(seconds);
  bubbles["work"] = work;
  if (config_.rollout.multi_turn()) {
    bubbles["tool_wait"] = instances_.empty() || seconds <= 0
                               ? 0.0
                               : tool_wait / (seconds * static_cast<double>(instances_.size()));
  }
  return bubbles;
}

nlohmann::json Admission::instance_metrics() {
  int64_t failed = 0, stolen = 0, cut = 0, cut_tokens = 0, resumed = 0, environment_errors = 0;
  std::map<std::string, int64_t> trajectory_counters;
  for (const InstanceView& view : instances_) {
    for (const auto& [name, value] : view.status.trajectory_counters) {
      trajectory_counters[name] += value;
    }
    failed += view.failed ? 1 : 0;
    stolen += view.status.stolen_groups;
    cut += view.status.cut_samples;
    cut_tokens += view.status.cut_tokens;
    resumed += view.status.resumed_samples;
    environment_errors += view.status.environment_errors;
  }
  // How stale the dispatcher's view of the instances got (rollout_worker.h bounds it).
  nlohmann::json metrics = {{"instance_status_age_max_s", status_age_max_s_},
                            {"failed_instances", failed},
                            // cumulative: groups an idle instance took over
                            {"stolen_groups", stolen},
                            // cumulative: partial rollouts (rollout_worker.h)
                            {"partial_cut_samples", cut},
                            {"partial_cut_tokens", cut_tokens},
                            {"partial_resumed_samples", resumed}};
  status_age_max_s_ = 0.0;
  if (config_.rollout.multi_turn()) {
    metrics["environment_errors"] = environment_errors;  // cumulative (trajectory_loop.h)
    // cumulative: an agent loop's calls, refusals and faults (agent_loop.h)
    for (const auto& [name, value] : trajectory_counters) metrics[name] = value;
  }
  return metrics;
}

nlohmann::json Admission::state() const {
  nlohmann::json pending = nlohmann::json::array();
  for (const PromptGroup& group : prompts_.open_groups())
    pending.push_back({group.group_id, group.example});
  return {{"prompts", prompts_.state()},
          {"pending", pending},
          {"consumed_groups", consumed_groups_},
          {"refilled_groups", refilled_groups_}};
}

void Admission::restore(const nlohmann::json& state, int64_t version) {
  prompts_.restore(state.at("prompts"));
  consumed_groups_ = state.at("consumed_groups").get<int64_t>();
  refilled_groups_ = state.at("refilled_groups").get<int64_t>();
  for (const auto& entry : state.value("pending", nlohmann::json::array())) {
    admit_group(PromptGroup{entry.at(0).get<int64_t>(), entry.at(1).get<int64_t>()}, version);
  }
}

}  // namespace aspen::pipeline
