#include "aspen/pipeline/async_schedule.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "aspen/dock/in_process_transport.h"
#include "aspen/pipeline/bubble_accounting.h"
#include "aspen/pipeline/dispatch_policy.h"
#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/pipeline/sync_schedule.h"
#include "aspen/pipeline/trace_writer.h"
#include "aspen/rollout/instance_pool.h"
#include "aspen/train/model_copy.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/thread_affinity.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kUnknownVersion = std::numeric_limits<int64_t>::max();

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The policy as a versioned set for the instances' weight board.
std::shared_ptr<const WeightSet> weights_of(const QwenForCausalLM& model, int64_t version) {
  auto set = std::make_shared<WeightSet>();
  set->version = version;
  for (auto& [name, tensor] : policy_weights(model)) set->tensors.emplace_back(name, tensor);
  return set;
}

// One admitted prompt group, until the trainer takes it.
struct GroupTrack {
  int64_t version_bound = 0;     // rollout version at admission: its version is >= this
  int64_t example = 0;           // train example index (regenerated from it on resume)
  bool ready = false;            // in the dock and scored
  std::vector<double> scores;    // verifier scores of its rows (ready groups)
  std::vector<int64_t> lengths;  // response tokens of its rows
  int64_t version = kUnknownVersion;
  Clock::time_point ready_at;
};

class AsyncSchedule : public Schedule {
 public:
  explicit AsyncSchedule(const ScheduleContext& context);
  ~AsyncSchedule() override { stop(); }

  nlohmann::json iteration(int64_t index) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  void stop() override;
  int64_t samples() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
  }
  int64_t trained_tokens() const override { return trained_tokens_; }

 private:
  void admit();  // requires mutex_
  void collect();
  void collect_loop();
  void finish_group(int64_t group_id, std::vector<Completion> samples);
  // Whether update `index` can form its batch now; requires mutex_.
  bool batch_ready(int64_t index, int64_t* ready_count) const;
  // Takes the batch's groups out of groups_; their scores/lengths/versions go to `rewards`.
  std::vector<int64_t> take_batch(int64_t index, RewardStats* rewards);  // requires mutex_
  // Streaming: the ready groups update `index` may take now, `taken` groups in - every
  // group that must train in it, then the least stale up to the batch size minus the
  // slots reserved for unfinished groups that may have to join it. *complete: the
  // batch is whole after this part; *ready_left: ready groups left waiting. mutex_.
  std::vector<int64_t> take_part(int64_t index, int64_t taken, RewardStats* rewards, bool* complete,
                                 int64_t* ready_left);
  void take_groups(const std::vector<int64_t>& ids, RewardStats* rewards);  // requires mutex_
  // Streaming update (pipeline.stream_updates): trains each part as it is taken.
  void stream_batch(int64_t index, IterationRecord& record, std::vector<int64_t>& batch,
                    double& idle, double& sorting);
  // The stages before the update on `claim`'s groups; returns whether the update may
  // take the proximal log-probs from its own forward pass.
  bool pre_update_stages(const ClaimOptions& claim, const std::vector<int64_t>& versions,
                         int64_t rows, IterationRecord& record);
  void submit_group(const PromptGroup& group);  // requires mutex_
  void report_throughput();

  const TrainConfig& config_;
  RlSetup& setup_;
  RlWorkers& workers_;
  TraceWriter* trace_;
  std::function<void(const std::string&)> inject_delay_;
  const int64_t batch_groups_;
  const int64_t eta_;
  const bool streams_;  // trains groups as they are taken (see async_schedule.h)

  InstancePool pool_;
  Dispatcher dispatcher_;
  TransferDock dock_;
  BubbleAccounting bubbles_;
  int trainer_track_ = 0;
  int collector_track_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  PromptSource prompts_;                  // GUARDED_BY(mutex_)
  std::map<int64_t, GroupTrack> groups_;  // GUARDED_BY(mutex_) admitted, untrained
  int64_t admitted_ = 0;                  // GUARDED_BY(mutex_) admitted, not yet trained
  int64_t rollout_version_ = 0;           // GUARDED_BY(mutex_)
  int64_t samples_ = 0;                   // GUARDED_BY(mutex_)
  int64_t aborted_groups_ = 0;            // GUARDED_BY(mutex_)
  int64_t trained_groups_ = 0;            // GUARDED_BY(mutex_)
  std::exception_ptr collector_error_;    // GUARDED_BY(mutex_) rethrown by the trainer

  int64_t version_ = 0;  // trainer's policy version
  int64_t trained_tokens_ = 0;
  std::vector<double> busy_at_start_;  // instances' busy seconds at the last iteration start
  int blas_threads_before_ = 0;        // restored by stop()
  std::atomic<bool> stopping_{false};
  std::thread collector_;
};

// Streaming needs a single optimizer step whose loss and advantages decompose over
// groups: group-local advantage estimators, no batch-level KL controller, no critic.
bool streams_updates(const TrainConfig& config, const RlWorkers& workers) {
  const std::string& name = config.algorithm.name;
  const int64_t rows = config.rollout.prompts_per_iteration * config.rollout.n;
  return config.pipeline.stream_updates && config.train.epochs == 1 &&
         (config.train.mini_batch_size <= 0 || config.train.mini_batch_size >= rows) &&
         !workers.critic && !config.algorithm.kl_in_reward &&
         (name == "grpo" || name == "dapo" || name == "dr_grpo" || name == "rloo");
}

std::vector<QwenForCausalLM> instance_models(const RlSetup& setup, int64_t count) {
  std::vector<QwenForCausalLM> models;
  for (int64_t i = 0; i < count; ++i) {
    models.push_back(copy_model(setup.model, torch::kFloat, setup.rollout_device, /*trainable=*/false));
  }
  return models;
}

std::vector<InstanceOptions> instance_options(const TrainConfig& config, const RlSetup& setup,
                                              TraceWriter* trace) {
  std::vector<InstanceOptions> options;
  const PipelineSection& p = config.pipeline;
  for (int64_t i = 0; i < p.instances; ++i) {
    InstanceOptions o;
    o.engine = rollout_engine_config(config, setup);
    o.engine.interrupt_on_weight_update = p.interrupt;
    o.intra_op_threads = p.rollout_threads;
    if (!p.rollout_cores.empty()) {
      o.cores = {p.rollout_cores[static_cast<size_t>(i) % p.rollout_cores.size()]};
    }
    if (trace != nullptr) {
      const int track = trace->track("rollout instance " + std::to_string(i));
      o.on_step = [trace, track](Clock::time_point start, Clock::time_point end, int64_t tokens) {
        trace->span(track, "generate step", start, end, {{"tokens", tokens}});
      };
    }
    options.push_back(o);
  }
  return options;
}

AsyncSchedule::AsyncSchedule(const ScheduleContext& context)
    : config_(context.config),
      setup_(context.setup),
      workers_(context.workers),
      trace_(context.trace),
      inject_delay_(context.inject_delay),
      batch_groups_(config_.rollout.prompts_per_iteration),
      eta_(config_.pipeline.max_staleness),
      streams_(streams_updates(config_, workers_)),
      pool_(instance_models(setup_, config_.pipeline.instances),
            instance_options(config_, setup_, context.trace), setup_.tokenizer),
      dispatcher_(parse_dispatch_policy(config_.pipeline.dispatch),
                  static_cast<int>(config_.pipeline.instances)),
      dock_(std::make_shared<InProcessTransport>(
          std::make_shared<InProcessDock>(make_rl_schema(workers_.schema),
                                          DockControllerOptions{1 << 16}, 1),
          0)),
      bubbles_(static_cast<int>(config_.pipeline.instances), 1),
      prompts_(static_cast<int64_t>(setup_.train_examples.size()), config_.train.seed) {
  if (trace_ != nullptr) {
    trainer_track_ = trace_->track("trainer");
    collector_track_ = trace_->track("collector (reward)");
  }
  pin_current_thread(config_.pipeline.trainer_cores, "trainer");
  // Each role keeps to its own cores: OpenBLAS' pool would otherwise fan every GEMM
  // out over all cores, onto the rollout's (measured: updates 1.65x slower).
  blas_threads_before_ = blas_threads();
  set_blas_threads(std::max(1, config_.pipeline.threads));
}

void AsyncSchedule::admit() {
  while (trained_groups_ + admitted_ < (rollout_version_ + eta_ + 1) * batch_groups_) {
    submit_group(prompts_.next(1).front());
  }
}

void AsyncSchedule::submit_group(const PromptGroup& group) {
  GenerationRequest request = group_request(config_, setup_, group);
  const GroupShape shape{config_.rollout.n, static_cast<int64_t>(request.prompt.size()),
                         config_.rollout.max_tokens};
  const int instance = dispatcher_.choose(pool_.queue_states(), shape);
  GroupTrack track;
  track.version_bound = rollout_version_;
  track.example = group.example;
  groups_[group.group_id] = std::move(track);
  ++admitted_;
  dispatcher_.on_dispatched(instance, shape);
  pool_.submit(instance, std::move(request));
  if (trace_ != nullptr) {
    trace_->instant(trainer_track_, "admit", {{"group", group.group_id}, {"instance", instance}});
  }
}

void AsyncSchedule::collect() {
  try {
    collect_loop();
  } catch (...) {
    // E.g. a verifier error: the trainer rethrows it instead of waiting forever.
    std::lock_guard<std::mutex> lock(mutex_);
    collector_error_ = std::current_exception();
    ready_cv_.notify_all();
  }
}

void AsyncSchedule::collect_loop() {
  std::map<int64_t, std::vector<Completion>> partial;
  while (!stopping_) {
    std::optional<PooledCompletion> done = pool_.pop_completion(std::chrono::milliseconds(20));
    if (!done) continue;
    const Completion& c = done->completion;
    dispatcher_.on_completed(done->instance, static_cast<int64_t>(c.prompt_token_ids.size()),
                             static_cast<int64_t>(c.token_ids.size()));
    const int64_t group_id = std::stoll(c.request_id);
    std::vector<Completion>& samples = partial[group_id];
    samples.push_back(std::move(done->completion));
    if (static_cast<int64_t>(samples.size()) < config_.rollout.n) continue;
    std::vector<Completion> complete = std::move(samples);
    partial.erase(group_id);
    finish_group(group_id, std::move(complete));
  }
}

void AsyncSchedule::finish_group(int64_t group_id, std::vector<Completion> samples) {
  const bool aborted = std::any_of(samples.begin(), samples.end(), [](const Completion& c) {
    return c.finish_reason == FinishReason::kAbort;
  });
  if (aborted) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_warn("async pipeline: group ", group_id, " was aborted by its instance; dropped");
    groups_.erase(group_id);
    prompts_.close(group_id);
    --admitted_;  // its admission slot goes to a new group
    ++aborted_groups_;
    ready_cv_.notify_all();
    return;
  }
  if (inject_delay_) inject_delay_("collector");
  const auto start = Clock::now();
  std::vector<RowInfo> infos;
  int64_t version = kUnknownVersion;
  for (const Completion& c : samples) {
    RowInfo info;
    info.group_id = group_id;
    info.group_size = static_cast<int32_t>(config_.rollout.n);
    info.tokens = static_cast<int64_t>(c.token_ids.size());
    info.version = c.policy_versions.empty() ? 0 : c.policy_versions.front();
    version = std::min(version, info.version);
    infos.push_back(info);
  }
  dock_.put(infos, rollout_columns(samples));
  ClaimOptions claim = claim_rows(static_cast<int64_t>(samples.size()), true);
  claim.groups = {group_id};
  RewardStats scored;
  {
    // The reward stage reads the prompt source (example of the group): under mutex_.
    std::lock_guard<std::mutex> lock(mutex_);
    scored = reward_stage(config_, setup_, prompts_, dock_, claim);
  }
  const auto end = Clock::now();
  if (trace_ != nullptr) {
    trace_->span(collector_track_, "reward", start, end, {{"group", group_id}});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  GroupTrack& track = groups_.at(group_id);
  track.ready = true;
  track.version = version;
  track.scores = scored.scores;
  track.lengths = scored.lengths;
  track.ready_at = end;
  samples_ += static_cast<int64_t>(samples.size());
  ready_cv_.notify_all();
}

bool AsyncSchedule::batch_ready(int64_t index, int64_t* ready_count) const {
  int64_t ready = 0;
  bool must_waiting = false;
  for (const auto& [id, track] : groups_) {
    if (track.ready) {
      ++ready;
    } else if (track.version_bound <= index - eta_) {
      must_waiting = true;  // may still turn out as old as index - eta
    }
  }
  *ready_count = ready;
  return !must_waiting && ready >= batch_groups_;
}

std::vector<int64_t> AsyncSchedule::take_batch(int64_t index, RewardStats* rewards) {
  std::vector<std::pair<std::pair<int64_t, Clock::time_point>, int64_t>> candidates;
  std::vector<int64_t> batch;
  for (const auto& [id, track] : groups_) {
    if (!track.ready) continue;
    if (track.version <= index - eta_) {
      batch.push_back(id);  // must train now
    } else {
      candidates.push_back({{track.version, track.ready_at}, id});
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& candidate : candidates) {
    if (static_cast<int64_t>(batch.size()) >= batch_groups_) break;
    batch.push_back(candidate.second);
  }
  take_groups(batch, rewards);
  return batch;
}

void AsyncSchedule::take_groups(const std::vector<int64_t>& ids, RewardStats* rewards) {
  for (int64_t id : ids) {
    const GroupTrack& track = groups_.at(id);
    rewards->scores.insert(rewards->scores.end(), track.scores.begin(), track.scores.end());
    rewards->lengths.insert(rewards->lengths.end(), track.lengths.begin(), track.lengths.end());
    rewards->versions.insert(rewards->versions.end(), track.lengths.size(), track.version);
    rewards->groups.insert(id);
    groups_.erase(id);
    prompts_.close(id);
    --admitted_;
    ++trained_groups_;
  }
}

std::vector<int64_t> AsyncSchedule::take_part(int64_t index, int64_t taken, RewardStats* rewards,
                                              bool* complete, int64_t* ready_left) {
  std::vector<int64_t> part;
  std::vector<std::pair<std::pair<int64_t, Clock::time_point>, int64_t>> candidates;
  int64_t pending_must = 0;  // unfinished groups that may turn out as old as index - eta
  for (const auto& [id, track] : groups_) {
    if (!track.ready) {
      if (track.version_bound <= index - eta_) ++pending_must;
    } else if (track.version <= index - eta_) {
      part.push_back(id);  // must train in this update
    } else {
      candidates.push_back({{track.version, track.ready_at}, id});
    }
  }
  // Slots the staleness bound reserves for groups still generating stay free.
  int64_t free = batch_groups_ - taken - static_cast<int64_t>(part.size()) - pending_must;
  std::sort(candidates.begin(), candidates.end());
  int64_t chosen = 0;
  for (const auto& candidate : candidates) {
    if (chosen >= free) break;
    part.push_back(candidate.second);
    ++chosen;
  }
  take_groups(part, rewards);
  *complete = pending_must == 0 && taken + static_cast<int64_t>(part.size()) >= batch_groups_;
  *ready_left = static_cast<int64_t>(candidates.size()) - chosen;
  return part;
}

void AsyncSchedule::report_throughput() {
  const std::vector<EngineStats> stats = pool_.stats();
  for (size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].busy_seconds > 0.5) {
      dispatcher_.on_throughput(
          static_cast<int>(i),
          static_cast<double>(stats[i].scheduled_tokens) / stats[i].busy_seconds);
    }
  }
}

bool AsyncSchedule::pre_update_stages(const ClaimOptions& claim,
                                      const std::vector<int64_t>& versions, int64_t rows,
                                      IterationRecord& record) {
  nlohmann::json& stages = record.stage_seconds;
  // Old log-probs: the rollout's when every row was generated by exactly the weights
  // about to be updated and the update is a single step; otherwise the trainer
  // recomputes them (the proximal policy of decoupled PPO).
  const bool fresh =
      std::all_of(versions.begin(), versions.end(), [&](int64_t v) { return v == version_; });
  const bool one_step = config_.train.epochs == 1 && (config_.train.mini_batch_size <= 0 ||
                                                      config_.train.mini_batch_size >= rows);
  if (workers_.reference) {
    timed_stage(stages, "reference", trace_, trainer_track_,
                [&] { reference_stage(*workers_.reference, dock_, claim); });
  }
  // Without a decoupled correction the rollout log-probs ARE the right PPO anchor for
  // stale rows (the ratio is then the importance weight to the behaviour policy), so
  // nothing is recomputed. Decoupled PPO needs the proximal policy: for a single-step
  // update that is the current policy, which the update's own forward pass provides
  // (the old_logprobs column then holds the rollout's and is not read); otherwise it
  // is recomputed here.
  const bool decoupled = config_.algorithm.off_policy == "decoupled";
  const bool proximal_in_update = one_step && decoupled && !fresh;
  const bool reuse = one_step && (fresh || !decoupled);
  timed_stage(stages, "old_logprobs", trace_, trainer_track_, [&] {
    old_logprob_stage(*workers_.actor, dock_, claim, reuse || proximal_in_update);
  });
  if (workers_.critic) {
    timed_stage(stages, "values", trace_, trainer_track_,
                [&] { value_stage(*workers_.critic, dock_, claim); });
  }
  timed_stage(stages, "advantage", trace_, trainer_track_, [&] {
    const AdvantageStats part = advantage_stage(config_.algorithm, workers_.kl_ctrl, dock_, claim);
    record.advantages.rows += part.rows;
    record.advantages.kl_in_reward = part.kl_in_reward;
    record.advantages.kl_coef = part.kl_coef;
  });
  return proximal_in_update;
}

void AsyncSchedule::stream_batch(int64_t index, IterationRecord& record,
                                 std::vector<int64_t>& batch, double& idle, double& sorting) {
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  nlohmann::json& stages = record.stage_seconds;
  bool complete = false;
  while (!complete) {
    RewardStats part_rewards;
    std::vector<int64_t> part;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      admit();
      while (true) {
        if (collector_error_) std::rethrow_exception(collector_error_);
        int64_t ready_left = 0;
        part = take_part(index, static_cast<int64_t>(batch.size()), &part_rewards, &complete,
                         &ready_left);
        if (!part.empty() || complete) break;
        const auto wait_start = Clock::now();
        ready_cv_.wait_for(lock, std::chrono::milliseconds(20));
        const auto wait_end = Clock::now();
        const double waited = seconds_between(wait_start, wait_end);
        idle += waited;
        // Sorting: ready groups wait while the staleness bound holds the batch's last
        // slots for groups still generating; otherwise the trainer is starved.
        if (ready_left > 0) sorting += waited;
        if (trace_ != nullptr) trace_->span(trainer_track_, "wait", wait_start, wait_end);
        admit();  // aborted groups return admission slots
      }
    }
    if (part.empty()) continue;
    batch.insert(batch.end(), part.begin(), part.end());
    RewardStats& all = record.rewards;
    all.scores.insert(all.scores.end(), part_rewards.scores.begin(), part_rewards.scores.end());
    all.lengths.insert(all.lengths.end(), part_rewards.lengths.begin(), part_rewards.lengths.end());
    all.versions.insert(all.versions.end(), part_rewards.versions.begin(),
                        part_rewards.versions.end());
    all.groups.insert(part_rewards.groups.begin(), part_rewards.groups.end());
    const int64_t rows = static_cast<int64_t>(part.size()) * config_.rollout.n;
    ClaimOptions claim = claim_rows(rows, /*whole_groups=*/true);
    claim.groups = part;
    const bool proximal = pre_update_stages(claim, part_rewards.versions, rows, record);
    timed_stage(stages, "accumulate", trace_, trainer_track_, [&] {
      const UpdateStats stats =
          accumulate_update_stage(config_, workers_, dock_, claim, seed, proximal);
      record.update.rows += stats.rows;
      record.update.response_tokens += stats.response_tokens;
      record.update.row_versions.insert(record.update.row_versions.end(),
                                        stats.row_versions.begin(), stats.row_versions.end());
    });
  }
  if (inject_delay_) inject_delay_("trainer");
  timed_stage(stages, "update", trace_, trainer_track_,
              [&] { record.update.actor = finish_update_stage(config_, workers_, seed); });
}

nlohmann::json AsyncSchedule::iteration(int64_t index) {
  const auto iteration_start = Clock::now();
  if (!collector_.joinable()) collector_ = std::thread([this] { collect(); });
  if (busy_at_start_.empty()) {
    for (const EngineStats& s : pool_.stats()) busy_at_start_.push_back(s.busy_seconds);
  }
  IterationRecord record;
  record.index = index;
  nlohmann::json& stages = record.stage_seconds;

  std::vector<int64_t> batch;
  double idle = 0.0, sorting = 0.0;
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  report_throughput();
  if (streams_) {
    stream_batch(index, record, batch, idle, sorting);
  } else {
    // Form the batch: admit up to the staleness bound, wait for the groups it needs.
    {
      std::unique_lock<std::mutex> lock(mutex_);
      admit();
      int64_t ready = 0;
      while (!batch_ready(index, &ready)) {
        if (collector_error_) std::rethrow_exception(collector_error_);
        const auto wait_start = Clock::now();
        ready_cv_.wait_for(lock, std::chrono::milliseconds(20));
        const double waited = seconds_between(wait_start, Clock::now());
        idle += waited;
        if (ready > 0) sorting += waited;  // ready rows exist, the batch is incomplete
        admit();                           // aborted groups return admission slots
      }
      batch = take_batch(index, &record.rewards);
    }
    if (trace_ != nullptr && idle > 0) {
      trace_->span(trainer_track_, "wait", iteration_start, Clock::now(), {{"sorting_s", sorting}});
    }
    const int64_t rows = static_cast<int64_t>(batch.size()) * config_.rollout.n;
    ClaimOptions claim = claim_rows(rows, /*whole_groups=*/true);
    claim.groups = batch;
    const bool proximal_in_update = pre_update_stages(claim, record.rewards.versions, rows, record);
    if (inject_delay_) inject_delay_("trainer");
    timed_stage(stages, "update", trace_, trainer_track_, [&] {
      record.update =
          update_stage(config_, workers_, dock_, claim, nullptr, seed, proximal_in_update);
    });
  }
  stages["wait"] = idle;
  bubbles_.add_idle(BubbleRole::kTrainer, idle);
  bubbles_.add_sorting_wait(sorting);
  ++version_;
  for (int64_t v : record.update.row_versions) bubbles_.add_staleness(index - v, 1);
  if (version_ % config_.pipeline.sync_every == 0) {
    timed_stage(stages, "publish", trace_, trainer_track_, [&] {
      pool_.publish_weights(weights_of(setup_.model, version_));
      std::lock_guard<std::mutex> lock(mutex_);
      rollout_version_ = version_;
      admit();
    });
  }

  trained_tokens_ += record.update.response_tokens;
  record.policy_version = version_;
  const auto end = Clock::now();
  record.seconds = seconds_between(iteration_start, end);

  // Rollout-side bubbles over this iteration's window.
  const std::vector<EngineStats> stats = pool_.stats();
  std::vector<double> busy;
  for (size_t i = 0; i < stats.size(); ++i) {
    busy.push_back(stats[i].busy_seconds - busy_at_start_[i]);
    busy_at_start_[i] = stats[i].busy_seconds;
    bubbles_.add_idle(BubbleRole::kRollout, std::max(0.0, record.seconds - busy.back()));
  }
  bubbles_.add_phase(busy);
  nlohmann::json line = iteration_metrics(record);
  line["bubbles"] = bubbles_.to_json(record.seconds);
  line["bubbles"]["padding_static_equivalent"] =
      padding_fraction({std::vector<int64_t>(record.rewards.lengths)});
  bubbles_.reset();
  line["trained_groups"] = static_cast<int64_t>(batch.size());
  line["batch_groups"] = batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    line["aborted_groups"] = aborted_groups_;
    line["rollout_version"] = rollout_version_;
  }
  return line;
}

nlohmann::json AsyncSchedule::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Groups admitted but not yet trained are regenerated on resume (same group ids,
  // so the same sampling seeds); what was in flight is not saved.
  nlohmann::json pending = nlohmann::json::array();
  for (const auto& [id, track] : groups_) pending.push_back({id, track.example});
  return {{"prompts", prompts_.state()},
          {"pending", pending},
          {"version", version_},
          {"samples", samples_},
          {"trained_tokens", trained_tokens_},
          {"trained_groups", trained_groups_},
          {"kl_reward_coef", workers_.kl_ctrl.value()}};
}

void AsyncSchedule::restore(const nlohmann::json& state) {
  check_input(!collector_.joinable(), "restore must come before the first iteration",
              "async schedule");
  version_ = state.at("version").get<int64_t>();
  trained_tokens_ = state.at("trained_tokens").get<int64_t>();
  workers_.kl_ctrl.restore(state.at("kl_reward_coef").get<double>());
  pool_.publish_weights(weights_of(setup_.model, version_));
  std::lock_guard<std::mutex> lock(mutex_);
  prompts_.restore(state.at("prompts"));
  samples_ = state.at("samples").get<int64_t>();
  trained_groups_ = state.at("trained_groups").get<int64_t>();
  rollout_version_ = version_;
  for (const auto& entry : state.at("pending")) {
    submit_group(PromptGroup{entry.at(0).get<int64_t>(), entry.at(1).get<int64_t>()});
  }
}

void AsyncSchedule::stop() {
  stopping_ = true;
  if (collector_.joinable()) collector_.join();
  if (blas_threads_before_ > 0) set_blas_threads(blas_threads_before_);
}

}  // namespace

std::unique_ptr<Schedule> make_async_schedule(const ScheduleContext& context) {
  return std::make_unique<AsyncSchedule>(context);
}

}  // namespace aspen
