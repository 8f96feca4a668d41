#include "aspen/pipeline/rollout_worker.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "aspen/parallel/object_collectives.h"
#include "aspen/pipeline/agent_loop.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/instance_plan.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rollout_claims.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/report/trace_writer.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"
#include "aspen/util/thread_affinity.h"

namespace aspen::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

int64_t environment_int(const char* name, int64_t otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoll(value) : otherwise;
}

}  // namespace

RolloutWorker::RolloutWorker(const TrainConfig& config, QwenForCausalLM model,
                             std::shared_ptr<const Tokenizer> tokenizer, TransferDock& dock,
                             RolloutWorkerOptions options)
    : config_(config),
      dock_(dock),
      options_(std::move(options)),
      engine_(std::move(model), options_.engine, tokenizer),
      weights_(config.pipeline.weight_sync),
      step_delay_ms_(std::max<int64_t>(0, environment_int("ASPEN_FAULT_STEP_DELAY_MS", 0))) {
  if (options_.trajectories && options_.trajectories->agent) {
    AgentLoopOptions agent = *options_.trajectories->agent;
    agent.max_model_len = engine_.config().max_model_len;  // resolved from the model
    loop_ = std::make_unique<AgentLoop>(agent, std::move(tokenizer),
                                        *options_.trajectories->chat_template);
  } else if (options_.trajectories) {
    const TrajectoryEnvironments& t = *options_.trajectories;
    loop_ = std::make_unique<TrajectoryLoop>(t.loop, t.make_environment, std::move(tokenizer),
                                             *t.chat_template);
  }
  if (environment_int("ASPEN_FAULT_SIGKILL_RANK", -1) == options_.rank) {
    kill_after_steps_ = environment_int("ASPEN_FAULT_SIGKILL_AFTER_STEPS", -1);
  }
  status_.instance = options_.instance;
  status_.rank = options_.rank;
  if (options_.trace != nullptr) {
    track_ = options_.trace->track("rollout instance " + std::to_string(options_.instance) +
                                   " (rank " + std::to_string(options_.rank) + ")");
  }
}

bool RolloutWorker::refresh_weights() {
  std::shared_ptr<const WeightSet> latest;
  if (options_.own_shards) {
    const int64_t version = options_.own_shards->latest_version();
    if (version > engine_.policy_version()) latest = options_.own_shards->take(version);
  } else {
    latest = weights_.fetch(dock_, options_.weights_from, engine_.policy_version());
  }
  if (!latest) return false;
  const auto start = Clock::now();
  engine_.load_weights(latest->version, std::map<std::string, torch::Tensor>(
                                            latest->tensors.begin(), latest->tensors.end()));
  if (options_.peers) plan_weights_ = latest;  // the followers load it before the next step
  if (options_.trace != nullptr) {
    // What the fetch moved: the set's bytes, or with weight_sync delta the deltas'.
    options_.trace->span(track_, "load weights", start, Clock::now(),
                         {{"version", latest->version},
                          {"bytes", weights_.last().bytes},
                          {"deltas", weights_.last().deltas}});
  }
  return true;
}

QueueState RolloutWorker::load() const {
  QueueState queue = engine_.queue_state();
  if (loop_) queue.running += loop_->waiting();
  return queue;
}

bool RolloutWorker::has_room() const {
  return has_room_for_unit(load(), options_.dispatch_chunk, options_.engine.max_num_seqs);
}

int64_t RolloutWorker::claim_groups(double wait_s) {
  // The claim rule the simulator runs too (rollout_claims.h): units of its own while
  // the engine has room, else, run dry, any dispatched unit (work stealing).
  RolloutClaimer claimer;
  claimer.has_room = [this] { return !stopping_ && has_room(); };
  claimer.idle = [this] { return !engine_.has_unfinished(); };
  claimer.claim = [this](const ClaimOptions& options) {
    return dock_.claim(rl_consumers::kRollout, options);
  };
  claimer.start = [this](Claim claim) { return start_claim(std::move(claim)); };
  const RolloutClaimRound round = claim_rollout_units(
      options_.instance,
      rollout_claim_options(options_.dispatch_chunk, config_.rollout.n, engine_.policy_version(),
                            options_.lease_s),
      wait_s, claimer);
  status_.stolen_groups += round.stolen;
  return round.started;
}

bool RolloutWorker::start_claim(Claim claim) {
  // A claim holds whole groups (dispatch_chunk = n: the group's prompt is computed
  // once and shared) or a chunk of a group's samples, possibly from two groups; each
  // group's part becomes one request whose sample indices pick the part's seeds.
  // Partial rollouts: a row cut earlier carries its output; a finished one is done
  // already, an unfinished one continues as a request of its own.
  const std::vector<ColumnData> columns = dock_.get(claim);
  if (loop_) {
    HeldClaim held;
    held.started_version = engine_.policy_version();
    held.claim = std::move(claim);
    const int64_t lease = held.claim.lease;
    status_.claimed_samples += static_cast<int64_t>(held.claim.rows.size());
    start_trajectories(held, columns);
    held_[lease] = std::move(held);
    return true;
  }
  const ColumnData& prompts = find_column(columns, rl_columns::kPrompt);
  const ColumnData& samples = find_column(columns, rl_columns::kSampleIndex);
  const bool with_routing = engine_.config().record_routed_experts;
  std::map<int64_t, GenerationRequest> requests;  // by group
  std::vector<std::pair<int64_t, GenerationRequest>> resumed;  // (group, request)
  HeldClaim held;
  held.started_version = engine_.policy_version();
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const int64_t group = claim.rows[i].info.group_id;
    const int64_t sample = samples.values[i].item<int64_t>();
    held.row_samples.push_back(sample);
    const torch::Tensor prompt_tensor = prompts.values[i].to(torch::kInt64).contiguous();
    const std::vector<TokenId> prompt(prompt_tensor.data_ptr<int64_t>(),
                                      prompt_tensor.data_ptr<int64_t>() + prompt_tensor.numel());
    if (config_.pipeline.partial_rollout) {
      Completion saved = saved_output(columns, i, with_routing);
      if (saved.finish_reason != FinishReason::kNone) {
        saved.prompt_token_ids = prompt;
        saved.sample_index = sample;
        held.samples.push_back(std::move(saved));
        held.sample_groups.push_back(group);
        continue;
      }
      if (!saved.token_ids.empty()) {
        GenerationRequest request;
        request.id = std::to_string(group) + "/" + std::to_string(claim.lease) + "/" +
                     std::to_string(sample);
        request.prompt = prompt;
        request.params = rollout_sampling(config_, group);
        request.sample_indices = {sample};
        request.resume_from.tokens = std::move(saved.token_ids);
        request.resume_from.logprobs = std::move(saved.logprobs);
        request.resume_from.policy_versions = std::move(saved.policy_versions);
        request.resume_from.routed_experts = std::move(saved.routed_experts);
        resumed.emplace_back(group, std::move(request));
        continue;
      }
    }
    GenerationRequest& request = requests[group];
    if (request.id.empty()) {
      request.id = std::to_string(group) + "/" + std::to_string(claim.lease);
      request.prompt = prompt;
      request.params = rollout_sampling(config_, group);
      request.n = 0;
    }
    request.sample_indices.push_back(sample);
    ++request.n;
  }
  // Output resumed here was sampled by weights no older than the newest this instance
  // has seen published; continuing it under older ones would make versions go back.
  for (const auto& [group, request] : resumed) {
    const auto& versions = request.resume_from.policy_versions;
    if (*std::max_element(versions.begin(), versions.end()) > engine_.policy_version()) {
      refresh_weights();
      held.started_version = engine_.policy_version();
    }
  }
  held.claim = std::move(claim);
  std::vector<std::pair<int64_t, GenerationRequest>> all(std::move(resumed));
  for (auto& [group, request] : requests) all.emplace_back(group, std::move(request));
  for (auto& [group, request] : all) {
    const std::string id = request.id;
    const bool resumes = !request.resume_from.empty();
    // The followers add it too, with the same sampling (instance_plan.h).
    std::optional<PlannedRequest> planned;
    if (options_.peers) planned = planned_addition(request);
    try {
      engine_.add_request(std::move(request));
    } catch (const Error& e) {
      // Rows no instance can serve (e.g. longer than the KV cache) are dropped from
      // the dock, not retried forever. Every instance runs the same engine settings,
      // so the other chunks of a split group are refused alike and the whole group
      // leaves (no batch waits for a partial one).
      log_error("rollout instance ", options_.instance, ": group ", group, " dropped: ", e.what());
      held.aborted = true;
      continue;
    }
    if (resumes) ++status_.resumed_samples;
    held.requests.push_back(id);
    origins_[id] = {group, held.claim.lease};
    if (planned) plan_requests_.push_back(std::move(*planned));
  }
  if (held.requests.empty() && (held.aborted || held.samples.size() < held.claim.rows.size())) {
    dock_.discard(held.claim.row_ids());
    return false;
  }
  status_.claimed_samples += static_cast<int64_t>(held.claim.rows.size());
  const int64_t lease = held.claim.lease;
  if (held.requests.empty()) {  // every row had finished before its unit was cut
    finish_claim(held);
    return true;
  }
  held_[lease] = std::move(held);
  return true;
}

void RolloutWorker::finish_claim(HeldClaim& held) {
  const bool aborted = held.aborted || std::any_of(held.samples.begin(), held.samples.end(),
                                                   [](const Completion& c) {
                                                     return c.finish_reason == FinishReason::kAbort;
                                                   });
  if (aborted) {
    log_error("rollout instance ", options_.instance, ": rows of lease ", held.claim.lease,
              " were aborted by the engine; dropped");
    dock_.discard(held.claim.row_ids());
    return;
  }
  // Each row is one (group, sample) of the claim: its completion is found by both.
  std::map<std::pair<int64_t, int64_t>, const Completion*> by_sample;
  for (size_t i = 0; i < held.samples.size(); ++i) {
    by_sample[{held.sample_groups[i], held.samples[i].sample_index}] = &held.samples[i];
  }
  std::vector<RowId> ids;
  std::vector<RowInfo> infos;
  std::vector<Completion> ordered;
  for (size_t i = 0; i < held.claim.rows.size(); ++i) {
    const ClaimedRow& row = held.claim.rows[i];
    const Completion& c =
        *by_sample.at({row.info.group_id, held.row_samples[i]});
    RowInfo info = row.info;
    info.tokens = static_cast<int64_t>(c.token_ids.size());
    // Staleness counts from the oldest token (partial rollouts and in-flight updates
    // mix versions; they never decrease along a sample, so it is the first one).
    info.version = c.policy_versions.empty()
                       ? engine_.policy_version()
                       : *std::min_element(c.policy_versions.begin(), c.policy_versions.end());
    ids.push_back(row.id);
    infos.push_back(info);
    ordered.push_back(c);
  }
  int64_t prompt_tokens = 0;
  for (const Completion& c : ordered) prompt_tokens += static_cast<int64_t>(c.prompt_token_ids.size());
  publish_claim(held, ids, infos,
                response_columns(ordered, engine_.config().record_routed_experts), prompt_tokens);
}

void RolloutWorker::publish_claim(HeldClaim& held, const std::vector<RowId>& ids,
                                  const std::vector<RowInfo>& infos,
                                  const std::vector<ColumnData>& columns, int64_t prompt_tokens) {
  // A lease that ran out (this instance too slow to renew it) may have let another
  // instance regenerate the rows, and they may even have retired: then there is
  // nothing to write (the other instance wrote the same samples).
  if (!dock_.renew(held.claim, options_.lease_s)) {
    log_warn("rollout instance ", options_.instance, ": lease ", held.claim.lease,
             " had expired; another instance regenerates its rows");
    return;
  }
  status_.completed_samples += static_cast<int64_t>(ids.size());
  status_.completed_prompt_tokens += prompt_tokens;
  for (const RowInfo& info : infos) status_.completed_response_tokens += info.tokens;
  // Length and version with the response, in one controller call: the rows become
  // claimable for reward with their true infos.
  dock_.put_columns(ids, columns, infos);
  if (!dock_.ack(held.claim)) {
    log_warn("rollout instance ", options_.instance, ": lease ", held.claim.lease,
             " ran out while its rows were written; they may be generated again");
  }
}

void RolloutWorker::renew_leases() {
  if (seconds_since(last_renew_) < options_.lease_s / 4) return;
  last_renew_ = Clock::now();
  for (auto& [lease, held] : held_) {
    if (!dock_.renew(held.claim, options_.lease_s)) {
      log_warn("rollout instance ", options_.instance, ": lease ", lease, " was lost");
    }
  }
}

bool RolloutWorker::peer_is_idle() {
  for (const auto& [key, entry] : dock_.statuses(kInstanceStatusPrefix)) {
    const InstanceStatus peer = decode_instance_status(entry.value);
    if (peer.instance == options_.instance || peer.exited || entry.age_s > options_.lease_s) {
      continue;  // itself, or gone
    }
    if (peer.queue.running + peer.queue.waiting == 0) return true;
  }
  return false;
}

bool RolloutWorker::cut_at_weight_switch() {
  if (!config_.pipeline.partial_rollout || held_.empty() || !peer_is_idle()) return false;
  std::vector<int64_t> cut;
  for (const auto& [lease, held] : held_) {
    // Only units that ran under older weights: one started (or resumed) on these
    // weights is not cut again before it generated under them.
    if (held.aborted || held.started_version >= engine_.policy_version()) continue;
    int64_t longest = -1;
    for (const std::string& id : held.requests) {
      longest = std::max(longest, engine_.longest_output(id));
    }
    if (longest >= config_.pipeline.partial_rollout_min_tokens) cut.push_back(lease);
  }
  for (int64_t lease : cut) {
    HeldClaim& held = held_.at(lease);
    cut_claim(held);
    for (const std::string& id : held.requests) origins_.erase(id);
    held_.erase(lease);
  }
  return !cut.empty();
}

void RolloutWorker::cut_claim(HeldClaim& held) {
  for (const std::string& id : held.requests) {
    const int64_t group = origins_.at(id).group;
    for (Completion& c : engine_.cut_request(id)) {
      if (!c.token_ids.empty()) {
        ++status_.cut_samples;
        status_.cut_tokens += static_cast<int64_t>(c.token_ids.size());
      }
      held.samples.push_back(std::move(c));
      held.sample_groups.push_back(group);
    }
  }
  std::map<std::pair<int64_t, int64_t>, const Completion*> by_sample;
  for (size_t i = 0; i < held.samples.size(); ++i) {
    by_sample[{held.sample_groups[i], held.samples[i].sample_index}] = &held.samples[i];
  }
  std::vector<Completion> ordered;
  std::vector<RowInfo> infos;
  for (size_t i = 0; i < held.claim.rows.size(); ++i) {
    const ClaimedRow& row = held.claim.rows[i];
    const Completion& c = *by_sample.at({row.info.group_id, held.row_samples[i]});
    RowInfo info = row.info;
    // The batch's staleness window sees the row's oldest token from now on.
    if (!c.policy_versions.empty()) {
      info.version = *std::min_element(c.policy_versions.begin(), c.policy_versions.end());
    }
    infos.push_back(info);
    ordered.push_back(c);
  }
  if (!dock_.renew(held.claim, options_.lease_s)) {
    log_warn("rollout instance ", options_.instance, ": lease ", held.claim.lease,
             " had expired before its rows were cut; another instance regenerates them");
    return;
  }
  // The output with the rows' versions in one call, then the rows go back to the pool
  // without a target: any instance resumes them (rollout_worker.h, "partial").
  dock_.put_columns(held.claim.row_ids(),
                    partial_columns(ordered, engine_.config().record_routed_experts), infos);
  dock_.release(held.claim);
}

void RolloutWorker::post_status(bool exited) {
  status_.queue = load();
  status_.busy_seconds = engine_.stats().busy_seconds;
  status_.scheduled_tokens = engine_.stats().scheduled_tokens;
  status_.steps = engine_.stats().steps;
  status_.version = engine_.policy_version();
  status_.exited = exited;
  if (loop_) status_.trajectory_counters = loop_->counters();
  dock_.post_status(instance_status_key(options_.instance), encode_instance_status(status_));
  last_status_ = Clock::now();
  if (options_.trace != nullptr) {
    const std::string name = "instance " + std::to_string(options_.instance);
    options_.trace->counter(name + " running", static_cast<double>(status_.queue.running));
    options_.trace->counter(name + " waiting", static_cast<double>(status_.queue.waiting));
  }
}

void RolloutWorker::send_plan(bool step, bool stop) {
  ProcessGroupHandle& peers = *options_.peers;
  InstancePlan plan;
  plan.step = step;
  plan.stop = stop;
  plan.requests = std::move(plan_requests_);
  if (plan_weights_) {
    PlannedWeights weights;
    weights.version = plan_weights_->version;
    // Colocated, every peer holds its own shards of this version: only the version travels.
    weights.own_shards = options_.own_shards != nullptr;
    if (!weights.own_shards) {
      for (const auto& [name, tensor] : plan_weights_->tensors) {
        weights.names.push_back(name);
        weights.shapes.push_back(tensor.sizes().vec());
      }
    }
    plan.weights = std::move(weights);
  }
  nlohmann::json json = encode_instance_plan(plan);
  broadcast_json(peers, json, 0);
  if (plan.weights && !plan.weights->own_shards) {
    for (const auto& [name, tensor] : plan_weights_->tensors) {
      torch::Tensor data = tensor.to(torch::kFloat).contiguous().clone();
      peers.broadcast(data, 0);
    }
  }
  plan_weights_.reset();
  plan_requests_.clear();
  last_plan_ = Clock::now();
}

void RolloutWorker::follow() {
  at::set_num_threads(std::max(1, options_.intra_op_threads));
  pin_current_thread(options_.cores, "rollout instance " + std::to_string(options_.instance));
  torch::NoGradGuard no_grad;
  ProcessGroupHandle& peers = *options_.peers;
  while (true) {
    nlohmann::json json;
    broadcast_json(peers, json, 0);
    const InstancePlan plan = decode_instance_plan(json);
    if (plan.weights && plan.weights->own_shards) {
      const int64_t version = plan.weights->version;
      check_input(options_.own_shards != nullptr,
                  "the leader loaded its own shards; this peer has none",
                  "rollout instance " + std::to_string(options_.instance));
      // The leader adopted the version when its own rank had it; this rank's trainer
      // thread publishes its shards of the same update a moment earlier or later.
      const std::shared_ptr<const WeightSet> set =
          options_.own_shards->take_waiting(version, kOwnShardsWait);
      const int64_t waited_s =
          std::chrono::duration_cast<std::chrono::seconds>(kOwnShardsWait).count();
      check_input(set != nullptr,
                  "weights of version " + std::to_string(version) +
                      " were not published here within " + std::to_string(waited_s) + " s",
                  "rollout instance " + std::to_string(options_.instance) + " (rank " +
                      std::to_string(options_.rank) + ")");
      engine_.load_weights(
          version, std::map<std::string, torch::Tensor>(set->tensors.begin(), set->tensors.end()));
    } else if (plan.weights) {
      std::map<std::string, torch::Tensor> tensors;
      for (size_t i = 0; i < plan.weights->names.size(); ++i) {
        torch::Tensor data = torch::empty(plan.weights->shapes[i], torch::kFloat);
        peers.broadcast(data, 0);
        tensors[plan.weights->names[i]] = data;
      }
      engine_.load_weights(plan.weights->version, tensors);
    }
    // The leader's changes, in its order: its engine took each addition, so does this one.
    for (const PlannedRequest& planned : plan.requests) {
      if (planned.abort) {
        engine_.abort_request(planned.id);
      } else {
        engine_.add_request(planned_generation_request(planned));
      }
    }
    if (plan.stop) return;
    if (plan.step) engine_.step();  // the leader keeps the results
  }
}

bool RolloutWorker::run_is_over() {
  const auto entries = dock_.statuses(kRunStatusKey);
  auto it = entries.find(kRunStatusKey);
  return it != entries.end() && it->second.value == kRunDone;
}

void RolloutWorker::run() {
  try {
    run_loop();
  } catch (...) {
    // Followers must not wait for a plan that never comes.
    if (options_.peers) {
      try {
        send_plan(/*step=*/false, /*stop=*/true);
      } catch (const std::exception& e) {
        log_warn("rollout instance ", options_.instance, ": could not stop its peers: ", e.what());
      }
    }
    throw;
  }
  if (options_.peers) send_plan(/*step=*/false, /*stop=*/true);
  try {
    post_status(true);
  } catch (const std::exception& e) {
    // The run is over: the trainers may already have closed the dock.
    log_warn("rollout instance ", options_.instance, ": final status not posted: ", e.what());
  }
}

void RolloutWorker::run_loop() {
  // OpenMP's thread count is per calling thread, so this budget is this instance's own.
  at::set_num_threads(std::max(1, options_.intra_op_threads));
  pin_current_thread(options_.cores, "rollout instance " + std::to_string(options_.instance));
  torch::NoGradGuard no_grad;
  std::mt19937 jitter(static_cast<uint32_t>(options_.instance * 7919 + options_.rank));
  last_renew_ = Clock::now();
  last_plan_ = Clock::now();
  post_status(false);
  while (!stopping_) {
    if (health_check_) health_check_();
    // The update boundary of partial rollouts: new weights loaded.
    const bool cut = refresh_weights() && cut_at_weight_switch();
    // Idle: wait (briefly, to keep weights and status fresh) for a dispatched group.
    // Right after a cut this instance claims nothing: instances waiting for work take
    // the cut units first; it claims again after one step.
    // With trajectories in their environments an idle engine waits for them instead.
    const bool in_environment = loop_ && loop_->waiting() > 0;
    const bool claimed = !cut && claim_groups(in_environment ? 0.0 : 0.05) > 0;
    if (loop_) {
      if (!engine_.has_unfinished() && in_environment) {
        const auto wait_start = Clock::now();
        loop_->wait_ready(0.05);
        status_.tool_wait_seconds += seconds_since(wait_start);
      }
      drive_trajectories();
    }
    if (claimed || cut || seconds_since(last_status_) >= options_.status_period_s) {
      post_status(false);
      if (run_is_over()) break;  // what is still generating is not needed any more
    }
    if (!engine_.has_unfinished()) {
      // Idle followers hear from the leader at least every second: their wait for a
      // plan is a collective, which would time out.
      if (options_.peers && seconds_since(last_plan_) >= 1.0) send_plan(false, false);
      continue;
    }
    if (options_.peers) send_plan(/*step=*/true, /*stop=*/false);
    const int64_t tokens_before = engine_.stats().scheduled_tokens;
    const auto start = Clock::now();
    std::vector<Completion> finished = engine_.step();
    const int64_t tokens = engine_.stats().scheduled_tokens - tokens_before;
    if (options_.trace != nullptr && tokens > 0) {
      options_.trace->span(track_, "generate step", start, Clock::now(), {{"tokens", tokens}});
    }
    if (++steps_ == kill_after_steps_) {
      log_error("rollout instance ", options_.instance, ": fault injection, SIGKILL after ", steps_,
                " steps");
      raise(SIGKILL);
    }
    if (step_delay_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int64_t>(0, step_delay_ms_)(jitter)));
    }
    for (Completion& c : finished) {
      const RequestOrigin origin = origins_.at(c.request_id);
      HeldClaim& held = held_.at(origin.lease);
      if (loop_) {  // a model turn: the environment's step comes next
        origins_.erase(c.request_id);
        held.requests.erase(std::remove(held.requests.begin(), held.requests.end(), c.request_id),
                            held.requests.end());
        loop_->turn_finished({origin.lease, origin.group, c.sample_index}, c);
        continue;
      }
      held.samples.push_back(std::move(c));
      held.sample_groups.push_back(origin.group);
      if (held.samples.size() < held.claim.rows.size()) continue;
      finish_claim(held);
      for (const std::string& id : held.requests) origins_.erase(id);
      held_.erase(origin.lease);
    }
    renew_leases();
  }
}

}  // namespace aspen::pipeline
