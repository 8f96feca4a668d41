#include "aspen/pipeline/iteration_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "aspen/dock/in_process_transport.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/report/bubble_accounting.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"
#include "aspen/util/thread_affinity.h"

namespace aspen::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

IterationEngine::IterationEngine(const EngineContext& context,
                                 std::optional<ProcessGroupHandle> world)
    : config_(context.config),
      setup_(context.setup),
      rl_workers_(context.workers),
      trace_(context.trace),
      inject_delay_(context.inject_delay),
      reads_full_policy_after_(context.reads_full_policy_after),
      world_(std::move(world)),
      layout_(
          engine_layout(config_, world_ ? world_->rank() : 0, world_ ? world_->world_size() : 1)) {
  const int64_t batch_groups = config_.rollout.prompts_per_iteration;
  // Room for the admission window: (eta + 2) batches of groups, with slack.
  const int64_t capacity = std::max<int64_t>(
      1 << 12, (staleness_eta(config_) + 3) * batch_groups * config_.rollout.n * 2);
  const DockSchema schema = make_rl_schema(rl_workers_.schema);
  if (world_) {
    // Every rank creates the trainers' subgroup (a collective), members or not.
    std::vector<int> trainer_ranks;
    for (int r = 0; r < layout_.trainers; ++r) trainer_ranks.push_back(r);
    if (layout_.trainers > 1) trainers_ = world_->new_subgroup(trainer_ranks);
    // A rollout-only rank writes into trainer 0's warehouse: if it dies, only what it
    // was generating is lost (and regenerated), never a finished row.
    distributed_ = make_distributed_dock(*world_, schema, capacity, !layout_.trains());
    dock_ = distributed_.dock.get();
  } else {
    local_dock_ = std::make_unique<TransferDock>(std::make_shared<InProcessTransport>(
        std::make_shared<InProcessDock>(schema, DockControllerOptions{capacity}, 1), 0));
    dock_ = local_dock_.get();
  }
  swap_ = TrainingStateSwap(config_.placement.swap && layout_.trains());
  // A streamed update trains while it waits: nothing could be swapped out.
  streams_ = layout_.trainers == 1 && streams_updates(config_) && !swap_.enabled();
  publisher_.emplace(config_, setup_.model->config, layout_, world_ ? world_->world_size() : 0,
                     trainers_);
  if (trace_ != nullptr && layout_.trains()) {
    trainer_track_ = trace_->track("trainer (rank " + std::to_string(layout_.rank) + ")");
  }
  // A training rank serves its own instance's weights from its own warehouse; a
  // rollout-only rank's "local" warehouse is trainer 0's.
  ProcessWorkersOptions worker_options;
  worker_options.weights_from = dock_->transport().local_warehouse_id();
  worker_options.own_shards = publisher_->own_shards();
  worker_options.trace = trace_;
  workers_ = std::make_unique<ProcessWorkers>(config_, setup_, layout_, world_, *dock_,
                                              worker_options);
  if (is_admitter()) {
    admission_.emplace(config_, setup_, *dock_, layout_, trace_, trainer_track_);
    selector_.emplace(config_, *dock_, *admission_, trace_, trainer_track_, [this] {
      workers_->check();
      admission_->admit();
    });
  }
  if (layout_.trains()) {
    TrainerContext trainer;
    trainer.config = &config_;
    trainer.workers = &rl_workers_;
    trainer.trainers = trainers_;
    // A replica's TP ranks and pipeline stages all take its share's rows.
    trainer.dp_rank = layout_.rank / layout_.replica_size();
    trainer.tp = layout_.replica_size();
    trainer.trace = trace_;
    trainer.track = trainer_track_;
    stages_.emplace(trainer);
    pin_current_thread(config_.pipeline.trainer_cores, "trainer");
    // Each role keeps to its own cores: the BLAS pool would otherwise fan every GEMM
    // out over all cores, onto the rollout's (measured: updates 1.65x slower).
    blas_threads_before_ = blas_threads();
    set_blas_threads(std::max(1, config_.pipeline.threads));
    // The weights every instance starts from (version 0, or the resumed version).
    publisher_->publish(rl_workers_.actor->model(), setup_.model, version_, *dock_);
  }
  if (world_) world_->barrier();  // weights are on the board before any instance looks
}

std::string IterationEngine::await_status(const std::string& key) {
  while (true) {
    const auto entries = dock_->statuses(key);
    const auto it = entries.find(key);
    if (it != entries.end()) return it->second.value;
    workers_->check();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

BatchPlan IterationEngine::plan_batch(int64_t index, ChosenRows& chosen, BatchWait& wait) {
  BatchPlan plan;
  if (is_admitter()) {
    const auto wait_start = Clock::now();
    chosen = selector_->choose_batch(index, config_.placement.train_dp, wait);
    if (trace_ != nullptr && wait.idle_s > 0) {
      trace_->span(trainer_track_, "wait", wait_start, Clock::now(),
                   {{"sorting_s", wait.sorting_s}});
    }
    plan.trained = chosen.trained;
    plan.sampling_rounds = chosen.sampling_rounds;
    plan.rewards = chosen.rewards;
  }
  if (trainers_) {
    // The wait for a batch has no bound (generation takes as long as it takes), so
    // it stays out of collectives, which time out: trainer 0 posts the plan on the
    // status board and the others poll for it.
    const std::string key = "batch/" + std::to_string(index);
    if (is_admitter()) {
      dock_->post_status(key, encode_batch_plan(plan));
    } else {
      plan = decode_batch_plan(await_status(key));
    }
  }
  return plan;
}

void IterationEngine::train_whole_batch(int64_t index, const BatchPlan& plan,
                                        const std::vector<ColumnData>& share_columns,
                                        IterationRecord& record) {
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  PreparedShare share = stages_->prepare(plan.trained, share_columns, version_, record.stage_seconds);
  record.advantages = share.advantages;
  if (inject_delay_) inject_delay_("trainer");
  timed_stage(record.stage_seconds, "update", trace_, trainer_track_, [&] {
    record.update = stages_->update(share, seed);
    record.update.row_versions = plan.versions();
  });
}

void IterationEngine::stream_batch(int64_t index, IterationRecord& record, ChosenRows& drawn,
                                   BatchWait& wait) {
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  std::vector<int64_t> groups;
  while (true) {
    ChosenRows part = selector_->next_part(index, static_cast<int64_t>(groups.size()), wait);
    if (part.trained.rows.empty()) break;  // only when the batch is whole
    record.token_versions.add(
        token_version_stats(find_column(part.columns, rl_columns::kRolloutVersions)));
    for (int64_t group : part.rewards.groups) groups.push_back(group);
    record.rewards.append(part.rewards);
    PreparedShare share =
        stages_->prepare(part.trained, part.columns, version_, record.stage_seconds);
    record.advantages.rows += share.advantages.rows;
    timed_stage(record.stage_seconds, "accumulate", trace_, trainer_track_, [&] {
      const UpdateStats stats = stages_->accumulate(share, seed);
      record.update.rows += stats.rows;
      record.update.response_tokens += stats.response_tokens;
      record.update.row_versions.insert(record.update.row_versions.end(),
                                        stats.row_versions.begin(), stats.row_versions.end());
    });
    drawn.trained.rows.rows.insert(drawn.trained.rows.rows.end(), part.trained.rows.rows.begin(),
                                   part.trained.rows.rows.end());
    for (Claim& lease : part.leases) drawn.leases.push_back(std::move(lease));
    if (part.completes_batch) break;
  }
  if (is_admitter()) admission_->batch_whole(index, groups);
  if (inject_delay_) inject_delay_("trainer");
  timed_stage(record.stage_seconds, "update", trace_, trainer_track_,
              [&] { record.update.actor = stages_->finish(seed); });
}

void IterationEngine::publish() {
  // Instances switch to the new weights at their next step boundary.
  publisher_->publish(rl_workers_.actor->model(), setup_.model, version_, *dock_);
  if (trainers_) trainers_->barrier();  // every trainer's set is up before admission
  if (is_admitter()) admission_->set_published_version(version_);
}

nlohmann::json IterationEngine::iteration(int64_t index) {
  check_input(layout_.trains(), "a rollout-only rank runs serve(), not iterations",
              "iteration engine");
  workers_->start();
  const auto iteration_start = Clock::now();
  IterationRecord record;
  record.index = index;
  ChosenRows drawn;  // trainer 0: the batch's rows and the claims holding them
  BatchWait wait;
  int64_t swapped_bytes = 0;
  if (streams_) {
    stream_batch(index, record, drawn, wait);
    record.sampling_rounds = 1;
  } else {
    if (swap_.enabled()) {
      timed_stage(record.stage_seconds, "swap_out", trace_, trainer_track_,
                  [&] { swapped_bytes = swap_.swap_out(rl_workers_); });
    }
    const BatchPlan plan = plan_batch(index, drawn, wait);
    if (is_admitter()) admission_->batch_whole(index, groups_of(plan.trained));
    record.sampling_rounds = plan.sampling_rounds;
    record.rewards = plan.rewards;
    record.update.row_versions = plan.versions();
    if (is_admitter() && !plan.trained.rows.empty()) {
      record.token_versions =
          token_version_stats(find_column(drawn.columns, rl_columns::kRolloutVersions));
    }
    // Trainer 0 read every row's columns with the batch; another trainer reads its share's.
    const Claim share = stages_->share(plan.trained);
    std::vector<ColumnData> share_columns;
    if (is_admitter()) {
      share_columns = drawn.columns_of(share);
    } else if (!share.empty()) {
      share_columns = dock_->get(share);
    }
    if (swap_.enabled()) {
      timed_stage(record.stage_seconds, "swap_in", trace_, trainer_track_,
                  [&] { swap_.swap_in(); });
    }
    // Every group dropped (dynamic sampling) in every round: no update this time.
    if (!plan.trained.rows.empty()) train_whole_batch(index, plan, share_columns, record);
    drawn.trained = plan.trained;
  }
  const std::vector<int64_t> groups = groups_of(drawn.trained);
  if (is_admitter()) {
    for (const Claim& lease : drawn.leases) dock_->ack(lease);
    admission_->consume(groups, /*refill=*/false);
  }
  record.stage_seconds["wait"] = wait.idle_s;
  ++version_;
  // The full policy only for what reads it (weight_publisher.h): the board's weight
  // set when this version is published there, the driver's readers after this
  // iteration. Both follow from the config and the index, so every trainer agrees.
  const bool publishes = version_ % config_.pipeline.sync_every == 0;
  const bool read_after = !reads_full_policy_after_ || reads_full_policy_after_(index);
  if (((publishes && publisher_->publishes_full_policy()) || read_after) &&
      publisher_->full_policy_stale(version_)) {
    timed_stage(record.stage_seconds, "gather", trace_, trainer_track_,
                [&] { ensure_full_policy(); });
  }
  if (publishes) {
    timed_stage(record.stage_seconds, "publish", trace_, trainer_track_, [&] {
      publish();
      if (is_admitter()) admission_->admit();
    });
  }
  trained_tokens_ += record.update.response_tokens;
  record.policy_version = version_;
  record.seconds = seconds_since(iteration_start);
  nlohmann::json line = metrics_line(index, record, wait, static_cast<int64_t>(groups.size()),
                                     swapped_bytes);
  line["batch_groups"] = groups;
  return line;
}

nlohmann::json IterationEngine::metrics_line(int64_t index, IterationRecord& record,
                                             const BatchWait& wait, int64_t trained_groups,
                                             int64_t swapped_bytes) {
  nlohmann::json line = iteration_metrics(record);
  BubbleAccounting trainer(1, 1);
  trainer.add_idle(BubbleRole::kTrainer, wait.idle_s);
  trainer.add_sorting_wait(wait.sorting_s);
  for (int64_t v : record.update.row_versions) trainer.add_staleness(index - v, 1);
  nlohmann::json bubbles = trainer.to_json(record.seconds);
  nlohmann::json rollout = nlohmann::json::object();
  if (is_admitter()) {
    admission_->refresh_instances();
    rollout = admission_->rollout_bubbles(record.seconds);
  }
  if (trainers_) broadcast_json(*trainers_, rollout, 0);
  // Counted at the batch, not at the instances: rows still generating are not yet
  // samples of the run (and are regenerated after a resume).
  samples_ += static_cast<int64_t>(record.rewards.scores.size());
  for (const char* key : {"skewness", "rollout_idle"}) bubbles[key] = rollout.value(key, 0.0);
  if (rollout.contains("tool_wait")) bubbles["tool_wait"] = rollout["tool_wait"];
  // Steps, scheduled tokens and busy seconds of every instance this iteration.
  if (rollout.contains("work")) line["rollout_work"] = rollout["work"];
  bubbles["padding_static_equivalent"] = padding_fraction({record.rewards.lengths});
  line["bubbles"] = bubbles;
  line["trained_groups"] = trained_groups;
  // Dynamic sampling: groups drawn for this batch and dropped (all rewards equal).
  line["dropped_groups"] = static_cast<int64_t>(record.rewards.groups.size()) - trained_groups;
  if (swap_.enabled()) line["swapped_bytes"] = swapped_bytes;
  // Allgather-swap: bytes rank 0 received to build its inference shards (0 when the
  // inference layout is a split of the training one: every rank slices locally).
  if (const auto bytes = publisher_->reshard_bytes_moved()) line["reshard_bytes_moved"] = *bytes;
  if (is_admitter()) {
    line["rollout_version"] = admission_->published_version();
    line.update(admission_->instance_metrics());
    if (config_.pipeline.over_sample > 0) line.update(admission_->abort_metrics());
  } else {
    line["rollout_version"] = version_ - version_ % config_.pipeline.sync_every;
  }
  // This process's dock calls this iteration, each counted once per row it names
  // (TransferDock::row_calls): about 13 per generated row (docs/design.md).
  const int64_t row_calls = dock_->row_calls();
  line["dock_row_calls"] = row_calls - row_calls_before_;
  row_calls_before_ = row_calls;
  if (world_) line["ranks"] = world_->world_size();
  return line;
}

nlohmann::json IterationEngine::state() const {
  // Groups admitted but not yet trained are regenerated on resume (same group ids,
  // so the same sampling seeds); what was in flight is not saved.
  nlohmann::json state = {{"version", version_},
                          {"samples", samples_},
                          {"trained_tokens", trained_tokens_},
                          {"kl_reward_coef", rl_workers_.kl_ctrl.value()}};
  if (is_admitter()) state.update(admission_->state());
  return state;
}

void IterationEngine::restore(const nlohmann::json& state) {
  check_input(version_ == 0 && samples_ == 0, "restore must come before the first iteration",
              "iteration engine");
  if (!layout_.trains()) return;
  version_ = state.at("version").get<int64_t>();
  trained_tokens_ = state.at("trained_tokens").get<int64_t>();
  samples_ = state.at("samples").get<int64_t>();
  rl_workers_.kl_ctrl.restore(state.at("kl_reward_coef").get<double>());
  // setup.model is the restored full policy, which the actor was loaded from.
  publisher_->full_policy_loaded(version_);
  publish();
  if (is_admitter()) admission_->restore(state, version_);
}

bool IterationEngine::ensure_full_policy() {
  if (!layout_.trains()) return false;  // a rollout-only rank holds no policy to gather
  return publisher_->ensure_full_policy(rl_workers_.actor->model(), setup_.model, version_);
}

void IterationEngine::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (is_admitter()) {
    // Rollout ranks leave when they read this; in-process workers are told directly.
    try {
      dock_->post_status(kRunStatusKey, kRunDone);
    } catch (const std::exception& e) {
      log_warn("iteration engine: could not post the end of the run: ", e.what());
    }
  }
  swap_.swap_in();  // no-op unless swapped out
  workers_->stop();
  if (is_admitter() && world_) {
    // Keep the controller up until every live instance has seen the end (bounded).
    try {
      const auto deadline =
          Clock::now() + std::chrono::duration<double>(config_.pipeline.instance_timeout_s);
      while (Clock::now() < deadline) {
        bool all_left = true;
        for (const auto& [key, entry] : dock_->statuses(kInstanceStatusPrefix)) {
          const InstanceStatus status = decode_instance_status(entry.value);
          if (!status.exited && entry.age_s < config_.pipeline.instance_timeout_s) all_left = false;
        }
        if (all_left) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception& e) {  // stop() also runs while unwinding
      log_warn("iteration engine: while waiting for the instances to leave: ", e.what());
    }
  }
  if (blas_threads_before_ > 0) set_blas_threads(blas_threads_before_);
}

}  // namespace aspen::pipeline
