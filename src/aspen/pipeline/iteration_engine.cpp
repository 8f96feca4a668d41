#include "aspen/pipeline/iteration_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "aspen/algo/dapo.h"
#include "aspen/dock/claim_codec.h"
#include "aspen/dock/in_process_transport.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/parallel/tensor_parallel.h"
#include "aspen/pipeline/batch_plan.h"
#include "aspen/pipeline/dispatch_policy.h"
#include "aspen/pipeline/distributed_dock.h"
#include "aspen/pipeline/engine_layout.h"
#include "aspen/pipeline/instance_status.h"
#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/reward_worker.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/pipeline/rollout_worker.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/pipeline/training_state_swap.h"
#include "aspen/pipeline/weight_publisher.h"
#include "aspen/report/bubble_accounting.h"
#include "aspen/report/trace_writer.h"
#include "aspen/train/model_copy.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"
#include "aspen/util/thread_affinity.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;

// The batch lease: the trainer acks it after the update; its failure ends the run.
constexpr double kBatchLeaseSeconds = 24 * 3600.0;
constexpr double kPollSeconds = 0.02;  // the trainer's wait between batch claims
// DAPO dynamic sampling: sampling rounds per batch before it trains on what it has
// (DAPO's max_num_gen_batches; verl's recipe default is unbounded, 4 keeps a run whose
// policy has collapsed to uniform rewards from stalling).
constexpr int kMaxSamplingRounds = 4;

// Errors of this process's worker threads, for the trainer thread to rethrow.
class WorkerErrors {
 public:
  void add(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex_);
    errors_.push_back(std::move(error));
  }
  std::vector<std::exception_ptr> errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::exception_ptr> errors_;  // GUARDED_BY(mutex_)
};

// Status-board keys of workers that failed: "worker-error/rank <r>" -> the message.
constexpr const char* kWorkerErrorPrefix = "worker-error/";

// What trainer 0 knows of one rollout instance, from the status board.
struct InstanceView {
  InstanceStatus status;
  bool seen = false;
  bool failed = false;
  double age_s = 0.0;
  double busy_at_iteration_start = 0.0;
  int64_t steps_at_iteration_start = 0;
  int64_t tokens_at_iteration_start = 0;
};

class IterationEngine : public Schedule {
 public:
  IterationEngine(const ScheduleContext& context, std::optional<ProcessGroupHandle> world);
  ~IterationEngine() override { stop(); }

  nlohmann::json iteration(int64_t index) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  void stop() override;
  int64_t samples() const override { return samples_; }
  int64_t trained_tokens() const override { return trained_tokens_; }
  bool serves_only() const override { return !layout_.trains(); }
  void serve() override;
  bool evaluates_on_trainers() const override { return world_.has_value(); }
  std::optional<ProcessGroupHandle> trainer_group() const override { return trainers_; }

 private:
  bool is_admitter() const { return layout_.rank == 0; }
  int trainer_count() const { return layout_.trainers; }
  void start_workers();
  // Trainer 0: the instances' states from the board; handles failures.
  void refresh_instances();
  void admit();
  void admit_group(const PromptGroup& group, int64_t version_bound);
  int choose_instance(const GroupShape& shape);
  // Trainer 0: update `index`'s whole batch (with dynamic sampling, its informative
  // groups): its leases, the groups to train and their rows' versions; every drawn
  // row's rewards go into `record`.
  void choose_batch(int64_t index, IterationRecord& record, std::vector<Claim>& leases,
                    std::vector<int64_t>& groups, std::vector<int64_t>& versions, double& idle,
                    double& sorting);
  // Trainer 0: claims update `index`'s batch (whole or, streaming, the next part).
  Claim claim_batch(int64_t index, int64_t groups_wanted, bool whole, double& idle,
                    double& sorting);
  void read_back_rewards(const Claim& batch, RewardStats& rewards);
  // The stages before the update on `groups`; returns whether the update may take the
  // proximal log-probs from its own forward pass.
  bool pre_update_stages(const std::vector<int64_t>& groups, const std::vector<int64_t>& versions,
                         int64_t rows, IterationRecord& record);
  // One trainer: the stage claims its rows itself. Several: trainer 0 claims once,
  // balanced over the trainers, and every trainer computes on its share.
  template <typename Fn>
  void shared_stage(const char* consumer, const std::vector<int64_t>& groups, int64_t rows,
                    Fn&& fn);
  void train_whole_batch(int64_t index, const std::vector<int64_t>& groups,
                         const std::vector<int64_t>& versions, IterationRecord& record);
  void stream_batch(int64_t index, IterationRecord& record, std::vector<int64_t>& groups,
                    std::vector<Claim>& leases, double& idle, double& sorting);
  void publish_weights();  // this rank's set of version_ (collective over the trainers)
  void publish();
  void check_workers() const;
  // Polls the status board until `key` is posted; returns its value.
  std::string await_status(const std::string& key);
  nlohmann::json rollout_bubbles(double seconds);

  const TrainConfig& config_;
  RlSetup& setup_;
  RlWorkers& workers_;
  TraceWriter* trace_;
  std::function<void(const std::string&)> inject_delay_;
  std::optional<ProcessGroupHandle> world_;
  EngineLayout layout_;
  std::optional<ProcessGroupHandle> trainers_;  // trainer ranks (several trainers only)
  int dp_rank_ = 0;                             // which data-parallel share this trainer computes
  bool writes_ = true;  // training TP rank 0: writes its share's output columns
  // The full policy gathered and the weights published after each update.
  std::optional<WeightPublisher> publisher_;
  // placement.swap (eta 0: the trainer waits for every batch): the optimizer state
  // leaves memory while it waits, and comes back for the update.
  TrainingStateSwap swap_{false};
  const int64_t batch_groups_;
  const int64_t eta_;
  bool streams_ = false;
  int trainer_track_ = 0;

  DistributedDock distributed_;               // across ranks
  std::unique_ptr<TransferDock> local_dock_;  // one process
  TransferDock* dock_ = nullptr;
  WarehouseId weights_from_ = 0;

  std::vector<std::unique_ptr<RolloutWorker>> rollout_workers_;
  std::shared_ptr<WorkerErrors> worker_errors_ = std::make_shared<WorkerErrors>();
  void report_worker_error(const std::string& what);
  std::unique_ptr<RewardWorker> reward_worker_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;

  // Trainer 0 (the admitter and dispatcher).
  PromptSource prompts_;
  std::optional<Dispatcher> dispatcher_;
  std::vector<InstanceView> instances_;
  Clock::time_point started_ = Clock::now();
  int64_t published_version_ = 0;
  // Groups that left the backlog through a batch: trained, or dropped by dynamic
  // sampling. Those dropped before a batch's last round are replaced (refilled), so
  // admission keeps consumed - refilled + waiting below its bound.
  int64_t consumed_groups_ = 0;
  int64_t refilled_groups_ = 0;
  double status_age_max_s_ = 0.0;  // oldest live instance state read, this iteration

  int64_t version_ = 0;  // the trainers' policy version
  int64_t samples_ = 0;  // rows generated and drawn into batches (trained or dropped)
  int64_t trained_tokens_ = 0;
  int blas_threads_before_ = 0;
};

IterationEngine::IterationEngine(const ScheduleContext& context,
                                 std::optional<ProcessGroupHandle> world)
    : config_(context.config),
      setup_(context.setup),
      workers_(context.workers),
      trace_(context.trace),
      inject_delay_(context.inject_delay),
      world_(std::move(world)),
      layout_(
          engine_layout(config_, world_ ? world_->rank() : 0, world_ ? world_->world_size() : 1)),
      batch_groups_(config_.rollout.prompts_per_iteration),
      eta_(config_.pipeline.mode == PipelineMode::kAsync ? config_.pipeline.max_staleness : 0),
      prompts_(static_cast<int64_t>(setup_.train_examples.size()), config_.train.seed) {
  const RlSchemaOptions& schema = workers_.schema;
  // Room for the admission window: (eta + 2) batches of groups, with slack.
  const int64_t capacity =
      std::max<int64_t>(1 << 12, (eta_ + 3) * batch_groups_ * config_.rollout.n * 2);
  if (world_) {
    // Every rank creates the trainers' subgroup (a collective), members or not.
    std::vector<int> trainer_ranks;
    for (int r = 0; r < layout_.trainers; ++r) trainer_ranks.push_back(r);
    if (layout_.trainers > 1) trainers_ = world_->new_subgroup(trainer_ranks);
    // A rollout-only rank writes into trainer 0's warehouse: if it dies, only what it
    // was generating is lost (and regenerated), never a finished row.
    distributed_ =
        make_distributed_dock(*world_, make_rl_schema(schema), capacity, !layout_.trains());
    dock_ = distributed_.dock.get();
    // A training rank serves its own instance's weights from its own warehouse; a
    // rollout-only rank's "local" warehouse is trainer 0's.
    weights_from_ = dock_->transport().local_warehouse_id();
  } else {
    local_dock_ = std::make_unique<TransferDock>(std::make_shared<InProcessTransport>(
        std::make_shared<InProcessDock>(make_rl_schema(schema), DockControllerOptions{capacity}, 1),
        0));
    dock_ = local_dock_.get();
    weights_from_ = dock_->transport().local_warehouse_id();
  }
  swap_ = TrainingStateSwap(config_.placement.swap && layout_.trains());
  // A streamed update trains while it waits: nothing could be swapped out.
  streams_ = layout_.trainers == 1 && streams_updates(config_) && !swap_.enabled();
  dp_rank_ = layout_.rank / layout_.train_tp;
  writes_ = layout_.rank % layout_.train_tp == 0;
  publisher_.emplace(config_, setup_.model->config, layout_, world_ ? world_->world_size() : 0,
                     trainers_);
  const std::string rank_suffix = " (rank " + std::to_string(layout_.rank) + ")";
  if (trace_ != nullptr && layout_.trains())
    trainer_track_ = trace_->track("trainer" + rank_suffix);
  if (is_admitter()) {
    dispatcher_.emplace(config_.pipeline.dispatch, layout_.instances);
    instances_.resize(static_cast<size_t>(layout_.instances));
  }
  // Every rank creates every multi-rank (tensor- or expert-parallel) instance's
  // subgroup (a collective).
  std::map<int, ProcessGroupHandle> instance_groups;
  if (world_ && config_.placement.rollout_instance_size() > 1) {
    for (int i = 0; i < layout_.instances; ++i) {
      if (auto group = world_->new_subgroup(layout_.instance_ranks[static_cast<size_t>(i)])) {
        instance_groups.emplace(i, *group);
      }
    }
  }
  // The rollout instances of this rank, each with its own copy of the policy (its
  // shards, for a tensor-parallel instance).
  const int64_t kv_cache_bytes = rollout_kv_cache_bytes(
      config_, setup_, static_cast<int64_t>(layout_.instances_here.size()));
  for (size_t k = 0; k < layout_.instances_here.size(); ++k) {
    const int instance = layout_.instances_here[k];
    RolloutWorkerOptions options;
    options.instance = instance;
    options.rank = layout_.rank;
    options.engine = rollout_engine_config(config_, setup_);
    options.engine.kv_cache_bytes = kv_cache_bytes;
    options.engine.interrupt_on_weight_update = config_.pipeline.interrupt;
    options.intra_op_threads = config_.pipeline.rollout_threads;
    const std::vector<int>& cores = config_.pipeline.rollout_cores;
    if (!cores.empty()) options.cores = {cores[static_cast<size_t>(instance) % cores.size()]};
    options.weights_from = weights_from_;
    options.lease_s = config_.pipeline.instance_timeout_s;
    options.trace = trace_;
    options.own_shards = publisher_->own_shards();
    QwenForCausalLM model{nullptr};
    auto group = instance_groups.find(instance);
    if (group != instance_groups.end()) {
      options.peers = group->second;
      // Every rank of an instance steps the same batch: an expert-parallel instance's
      // ranks hold the same tokens (ExpertParallel::replicated_tokens).
      model = config_.placement.rollout_ep > 1
                  ? QwenForCausalLM(setup_.model->config, TensorParallel{},
                                    ExpertParallel::over(group->second, /*replicated_tokens=*/true))
                  : QwenForCausalLM(setup_.model->config, TensorParallel::over(group->second));
      if (config_.placement.rollout_ep > 1) {
        const int64_t experts = setup_.model->config.moe.num_experts;
        const int64_t first = model->ep.first_local_expert(experts);
        log_info("rollout instance ", instance, ": expert-parallel rank ", model->ep.rank, " of ",
                 model->ep.size, " holds experts [", first, ", ",
                 first + model->ep.local_expert_count(experts), ") of ", experts);
      }
      model->to(setup_.rollout_device);
      torch::NoGradGuard no_grad;
      std::map<std::string, torch::Tensor> full;
      for (const auto& [name, tensor] : setup_.model->hf_state()) full[name] = tensor.detach();
      model->load_state(full, "rollout weights");
      for (auto& parameter : model->parameters()) parameter.set_requires_grad(false);
    } else {
      model = copy_model(setup_.model, torch::kFloat, setup_.rollout_device, /*trainable=*/false);
    }
    rollout_workers_.push_back(
        std::make_unique<RolloutWorker>(config_, model, setup_.tokenizer, *dock_, options));
  }
  if (!layout_.instances_here.empty()) {
    reward_worker_ =
        std::make_unique<RewardWorker>(config_, setup_, *dock_, trace_, "reward" + rank_suffix);
  }
  if (layout_.trains()) {
    pin_current_thread(config_.pipeline.trainer_cores, "trainer");
    // Each role keeps to its own cores: the BLAS pool would otherwise fan every GEMM
    // out over all cores, onto the rollout's (measured: updates 1.65x slower).
    blas_threads_before_ = blas_threads();
    set_blas_threads(std::max(1, config_.pipeline.threads));
    // The weights every instance starts from (version 0, or the resumed version).
    publish_weights();
  }
  if (world_) world_->barrier();  // weights are on the board before any instance looks
}

void IterationEngine::start_workers() {
  if (!threads_.empty() || stopped_) return;
  const bool main_thread_serves = serves_only();
  for (size_t k = main_thread_serves ? 1 : 0; k < rollout_workers_.size(); ++k) {
    threads_.emplace_back([this, worker = rollout_workers_[k].get()] {
      try {
        if (worker->leads()) {
          worker->run();
        } else {
          worker->follow();
        }
      } catch (const std::exception& e) {
        log_error("rollout instance: ", e.what());
        worker_errors_->add(std::current_exception());
        report_worker_error(e.what());
      }
    });
  }
  if (reward_worker_) threads_.emplace_back([this] { reward_worker_->run(); });
}

void IterationEngine::report_worker_error(const std::string& what) {
  try {
    dock_->post_status(std::string(kWorkerErrorPrefix) + "rank " + std::to_string(layout_.rank),
                       what);
  } catch (const std::exception& e) {
    log_warn("could not report a worker error to the trainers: ", e.what());
  }
}

void IterationEngine::serve() {
  start_workers();
  // A rollout-only rank: its one instance runs (or follows, a tensor-parallel peer) on
  // this thread until the run is over.
  if (rollout_workers_.empty()) return;
  RolloutWorker& worker = *rollout_workers_.front();
  if (reward_worker_) {
    // The reward thread's failure ends this rank's instance too, and the trainers hear
    // of it from the board.
    worker.set_health_check([this] {
      if (std::exception_ptr error = reward_worker_->error()) std::rethrow_exception(error);
    });
  }
  try {
    if (worker.leads()) {
      worker.run();
    } else {
      worker.follow();
    }
  } catch (const std::exception& e) {
    report_worker_error(e.what());
    throw;
  }
}

void IterationEngine::check_workers() const {
  if (reward_worker_) {
    if (std::exception_ptr error = reward_worker_->error()) std::rethrow_exception(error);
  }
  for (const std::exception_ptr& error : worker_errors_->errors()) std::rethrow_exception(error);
  // A worker on another rank that failed says so on the board (rl_run: its rank then
  // exits, possibly tolerated, so its error must reach the trainers this way).
  for (const auto& [key, entry] : dock_->statuses(kWorkerErrorPrefix)) {
    throw Error(entry.value, key.substr(std::string(kWorkerErrorPrefix).size()));
  }
}

std::string IterationEngine::await_status(const std::string& key) {
  while (true) {
    const auto entries = dock_->statuses(key);
    const auto it = entries.find(key);
    if (it != entries.end()) return it->second.value;
    check_workers();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void IterationEngine::refresh_instances() {
  const auto entries = dock_->statuses(kInstanceStatusPrefix);
  for (const auto& [key, entry] : entries) {
    const InstanceStatus status = decode_instance_status(entry.value);
    check_input(status.instance >= 0 && status.instance < layout_.instances,
                "unknown instance " + std::to_string(status.instance), "status board");
    InstanceView& view = instances_[static_cast<size_t>(status.instance)];
    if (view.seen) {
      // Completion reports for the dispatcher: the new finished samples at their mean size.
      const int64_t done = status.completed_samples - view.status.completed_samples;
      for (int64_t s = 0; s < done; ++s) {
        dispatcher_->on_completed(
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
      dispatcher_->on_throughput(
          status.instance, static_cast<double>(status.scheduled_tokens) / status.busy_seconds);
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
    const int64_t moved = dock_->retarget(static_cast<int32_t>(i), -1);
    log_warn(what, "; its groups are regenerated elsewhere (", moved, " rows re-dispatched now)");
  }
  check_input(alive > 0, "every rollout instance has failed", "pipeline.on_instance_failure");
}

int IterationEngine::choose_instance(const GroupShape& shape) {
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
    const int chosen = dispatcher_->choose(states, shape);
    if (!instances_[static_cast<size_t>(chosen)].failed) return chosen;
  }
  throw Error("no live rollout instance to dispatch to", "pipeline.on_instance_failure");
}

void IterationEngine::admit_group(const PromptGroup& group, int64_t version_bound) {
  const GenerationRequest request = group_request(config_, setup_, group);
  const int64_t n = config_.rollout.n;
  const int64_t chunk = dispatch_chunk(config_);
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
    dispatcher_->on_dispatched(instance, shape);
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
  dock_->put(infos, {prompt, example, sample});
  if (trace_ != nullptr) {
    trace_->instant(trainer_track_, "admit", {{"group", group.group_id}, {"instances", targets}});
  }
}

void IterationEngine::admit() {
  refresh_instances();
  // Groups admitted and not yet given to a batch are the controller's backlog of the
  // batch consumer; discarded ones (no instance could serve them, or dropped by
  // dynamic sampling) left it and free their slot (staleness_window.h).
  const int64_t room = admissible_groups(published_version_, eta_, batch_groups_,
                                         consumed_groups_ - refilled_groups_,
                                         dock_->backlog(rl_consumers::kBatch), config_.rollout.n);
  for (int64_t i = 0; i < room; ++i) admit_group(prompts_.next(1).front(), published_version_);
}

Claim IterationEngine::claim_batch(int64_t index, int64_t groups_wanted, bool whole, double& idle,
                                   double& sorting) {
  ClaimOptions options =
      batch_claim_options(index, eta_, groups_wanted, config_.rollout.n, whole);
  options.timeout_s = kPollSeconds;
  options.lease_s = kBatchLeaseSeconds;
  while (true) {
    check_workers();
    admit();
    const auto wait_start = Clock::now();
    Claim claim = dock_->claim(rl_consumers::kBatch, options);
    if (!claim.empty()) return claim;
    const auto wait_end = Clock::now();
    const double waited = std::chrono::duration<double>(wait_end - wait_start).count();
    idle += waited;
    // Sorting: ready groups wait while the window keeps the batch open for groups
    // still generating; otherwise the trainer is starved.
    if (claim.ready_rows_left > 0) sorting += waited;
    if (trace_ != nullptr) trace_->span(trainer_track_, "wait", wait_start, wait_end);
  }
}

void IterationEngine::read_back_rewards(const Claim& batch, RewardStats& rewards) {
  const std::vector<ColumnData> columns = dock_->get(batch);
  const ColumnData& scores = find_column(columns, rl_columns::kVerifierScore);
  const ColumnData& shaped = find_column(columns, rl_columns::kScores);
  std::vector<double> shaped_rewards;
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const RowInfo& info = batch.rows[i].info;
    rewards.scores.push_back(scores.values[i].item<double>());
    rewards.lengths.push_back(info.tokens);
    rewards.versions.push_back(info.version);
    rewards.row_groups.push_back(info.group_id);
    rewards.groups.insert(info.group_id);
    shaped_rewards.push_back(shaped.values[i].item<double>());
  }
  rewards.informative = informative_groups(rewards.row_groups, shaped_rewards);
}

void IterationEngine::choose_batch(int64_t index, IterationRecord& record,
                                   std::vector<Claim>& leases, std::vector<int64_t>& groups,
                                   std::vector<int64_t>& versions, double& idle, double& sorting) {
  const bool filter = config_.algorithm.dynamic_sampling;
  const int rounds = filter ? kMaxSamplingRounds : 1;
  std::set<int64_t> kept;
  record.sampling_rounds = 0;
  while (static_cast<int64_t>(kept.size()) < batch_groups_ && record.sampling_rounds < rounds) {
    ++record.sampling_rounds;
    const int64_t wanted = batch_groups_ - static_cast<int64_t>(kept.size());
    Claim claim = claim_batch(index, wanted, /*whole=*/true, idle, sorting);
    RewardStats round;
    read_back_rewards(claim, round);
    record.rewards.append(round);  // the metrics cover every row generated
    // DAPO: a group whose rewards are all equal has zero advantage everywhere; it
    // leaves the dock, and (before the last round) a new group takes its slot.
    std::vector<RowId> dropped;
    std::set<int64_t> dropped_groups;
    for (const ClaimedRow& row : claim.rows) {
      const int64_t group = row.info.group_id;
      if (!filter || round.informative.count(group)) {
        kept.insert(group);
        versions.push_back(row.info.version);
      } else {
        dropped.push_back(row.id);
        dropped_groups.insert(group);
      }
    }
    if (!dropped.empty()) {
      dock_->discard(dropped);
      for (int64_t group : dropped_groups) prompts_.close(group);
      const auto count = static_cast<int64_t>(dropped_groups.size());
      consumed_groups_ += count;
      if (record.sampling_rounds < rounds) refilled_groups_ += count;
    }
    leases.push_back(std::move(claim));
  }
  groups.assign(kept.begin(), kept.end());
  if (groups.empty()) {
    log_warn("iteration ", index + 1, ": no informative group in ", rounds,
             " sampling rounds; the update is skipped (the policy version still advances)");
  }
}

template <typename Fn>
void IterationEngine::shared_stage(const char* consumer, const std::vector<int64_t>& groups,
                                   int64_t rows, Fn&& fn) {
  ClaimOptions options = claim_rows(rows, /*whole_groups=*/true);
  options.groups = groups;
  if (!trainers_) {
    const Claim claim = dock_->claim(consumer, options);
    fn(claim);
    dock_->ack(claim);
    return;
  }
  std::string encoded;
  if (is_admitter()) {
    options.balance_ranks = config_.placement.train_dp;
    encoded = encode_claim(dock_->claim(consumer, options));
  }
  broadcast_bytes(*trainers_, encoded, 0);
  const Claim claim = decode_claim(encoded);
  fn(share_of(claim, dp_rank_));
  trainers_->barrier();  // every share's columns are written
  if (is_admitter()) dock_->ack(claim);
}

bool IterationEngine::pre_update_stages(const std::vector<int64_t>& groups,
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
    timed_stage(stages, "reference", trace_, trainer_track_, [&] {
      shared_stage(rl_consumers::kReference, groups, rows, [&](const Claim& share) {
        reference_stage(*workers_.reference, *dock_, share, writes_);
      });
    });
  }
  // Without a decoupled correction the rollout log-probs ARE the right PPO anchor for
  // stale rows (the ratio is then the importance weight to the behaviour policy), so
  // nothing is recomputed. Decoupled PPO needs the proximal policy: for a single-step
  // update that is the current policy, which the update's own forward pass provides
  // (the old_logprobs column then holds the rollout's and is not read); otherwise it
  // is recomputed here.
  const bool decoupled = config_.algorithm.off_policy == OffPolicy::kDecoupled;
  const bool proximal_in_update = one_step && decoupled && !fresh;
  const bool reuse = one_step && (fresh || !decoupled);
  timed_stage(stages, "old_logprobs", trace_, trainer_track_, [&] {
    shared_stage(rl_consumers::kOldLogprobs, groups, rows, [&](const Claim& share) {
      old_logprob_stage(*workers_.actor, *dock_, share, reuse || proximal_in_update, writes_);
    });
  });
  if (workers_.critic) {
    timed_stage(stages, "values", trace_, trainer_track_, [&] {
      shared_stage(rl_consumers::kValues, groups, rows, [&](const Claim& share) {
        value_stage(*workers_.critic, *dock_, share, writes_);
      });
    });
  }
  timed_stage(stages, "advantage", trace_, trainer_track_, [&] {
    // Whole groups and batch-level statistics: trainer 0 computes every advantage.
    nlohmann::json stats;
    if (is_admitter()) {
      ClaimOptions options = claim_rows(rows, /*whole_groups=*/true);
      options.groups = groups;
      const AdvantageStats part =
          advantage_stage(config_.algorithm, workers_.kl_ctrl, *dock_, options);
      stats = {part.rows, part.kl_in_reward, part.kl_coef, workers_.kl_ctrl.value()};
    }
    if (trainers_) broadcast_json(*trainers_, stats, 0);  // also: every advantage is written
    record.advantages.rows += stats.at(0).get<int64_t>();
    record.advantages.kl_in_reward = stats.at(1).get<double>();
    record.advantages.kl_coef = stats.at(2).get<double>();
    workers_.kl_ctrl.restore(stats.at(3).get<double>());  // the same controller everywhere
  });
  return proximal_in_update;
}

void IterationEngine::train_whole_batch(int64_t index, const std::vector<int64_t>& groups,
                                        const std::vector<int64_t>& versions,
                                        IterationRecord& record) {
  const int64_t rows = static_cast<int64_t>(groups.size()) * config_.rollout.n;
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  const bool proximal = pre_update_stages(groups, versions, rows, record);
  if (inject_delay_) inject_delay_("trainer");
  timed_stage(record.stage_seconds, "update", trace_, trainer_track_, [&] {
    if (!trainers_) {
      ClaimOptions options = claim_rows(rows, /*whole_groups=*/true);
      options.groups = groups;
      record.update = update_stage(config_, workers_, *dock_, options, seed, proximal);
      return;
    }
    // Data-parallel: the actor (and critic) claims are made once and shared.
    UpdateStats stats;
    Claim critic_share;
    std::string actor_encoded, critic_encoded;
    ClaimOptions options = claim_rows(rows, /*whole_groups=*/true);
    options.groups = groups;
    options.balance_ranks = config_.placement.train_dp;
    if (is_admitter()) {
      actor_encoded = encode_claim(dock_->claim(rl_consumers::kActorUpdate, options));
      if (workers_.critic) {
        critic_encoded = encode_claim(dock_->claim(rl_consumers::kCriticUpdate, options));
      }
    }
    broadcast_bytes(*trainers_, actor_encoded, 0);
    if (workers_.critic) broadcast_bytes(*trainers_, critic_encoded, 0);
    const Claim actor = decode_claim(actor_encoded);
    const Claim critic = workers_.critic ? decode_claim(critic_encoded) : Claim{};
    stats = update_stage(config_, workers_, *dock_, share_of(actor, dp_rank_),
                         workers_.critic ? share_of(critic, dp_rank_) : Claim{}, seed, proximal);
    trainers_->barrier();
    if (is_admitter()) {
      dock_->ack(actor);
      if (workers_.critic) dock_->ack(critic);
    }
    // The update's metrics are global already; its row and token counts are this rank's
    // (and its tensor-parallel peers': counted once).
    const double peers = static_cast<double>(layout_.train_tp);
    torch::Tensor counts = torch::tensor({static_cast<double>(stats.rows) / peers,
                                          static_cast<double>(stats.response_tokens) / peers},
                                         torch::kFloat64);
    trainers_->all_reduce_sum(counts);
    stats.rows = std::llround(counts[0].item<double>());
    stats.response_tokens = std::llround(counts[1].item<double>());
    stats.row_versions = versions;
    record.update = stats;
  });
}

void IterationEngine::stream_batch(int64_t index, IterationRecord& record,
                                   std::vector<int64_t>& groups, std::vector<Claim>& leases,
                                   double& idle, double& sorting) {
  const uint64_t seed = config_.train.seed + static_cast<uint64_t>(index);
  const int64_t n = config_.rollout.n;
  while (true) {
    const int64_t wanted = batch_groups_ - static_cast<int64_t>(groups.size());
    Claim part;
    if (wanted > 0) part = claim_batch(index, wanted, /*whole=*/false, idle, sorting);
    if (part.empty()) break;  // only when the batch is whole
    RewardStats part_rewards;
    read_back_rewards(part, part_rewards);
    const std::vector<int64_t> part_groups(part_rewards.groups.begin(), part_rewards.groups.end());
    groups.insert(groups.end(), part_groups.begin(), part_groups.end());
    record.rewards.append(part_rewards);
    const bool done =
        static_cast<int64_t>(groups.size()) >= batch_groups_ && part.pending_required_rows == 0;
    leases.push_back(std::move(part));
    const int64_t rows = static_cast<int64_t>(part_groups.size()) * n;
    const bool proximal = pre_update_stages(part_groups, part_rewards.versions, rows, record);
    timed_stage(record.stage_seconds, "accumulate", trace_, trainer_track_, [&] {
      ClaimOptions options = claim_rows(rows, /*whole_groups=*/true);
      options.groups = part_groups;
      const UpdateStats stats =
          accumulate_update_stage(config_, workers_, *dock_, options, seed, proximal);
      record.update.rows += stats.rows;
      record.update.response_tokens += stats.response_tokens;
      record.update.row_versions.insert(record.update.row_versions.end(),
                                        stats.row_versions.begin(), stats.row_versions.end());
    });
    if (done) break;
  }
  if (inject_delay_) inject_delay_("trainer");
  timed_stage(record.stage_seconds, "update", trace_, trainer_track_,
              [&] { record.update.actor = finish_update_stage(config_, workers_, seed); });
}

void IterationEngine::publish_weights() {
  publisher_->publish(workers_.actor->model(), setup_.model, version_, *dock_);
}

void IterationEngine::publish() {
  // Instances switch to the new weights at their next step boundary.
  publish_weights();
  if (trainers_) trainers_->barrier();  // every trainer's set is up before admission
  if (is_admitter()) published_version_ = version_;
}

nlohmann::json IterationEngine::rollout_bubbles(double seconds) {
  BubbleAccounting phase(layout_.instances, trainer_count());
  std::vector<double> busy;
  // The instances' work this iteration: what aspen simulate calibrates its step costs on.
  nlohmann::json work = {{"steps", 0}, {"scheduled_tokens", 0}, {"busy_seconds", 0.0}};
  for (InstanceView& view : instances_) {
    const double b = std::max(0.0, view.status.busy_seconds - view.busy_at_iteration_start);
    work["steps"] = work["steps"].get<int64_t>() + view.status.steps - view.steps_at_iteration_start;
    work["scheduled_tokens"] = work["scheduled_tokens"].get<int64_t>() +
                               view.status.scheduled_tokens - view.tokens_at_iteration_start;
    work["busy_seconds"] = work["busy_seconds"].get<double>() + b;
    view.busy_at_iteration_start = view.status.busy_seconds;
    view.steps_at_iteration_start = view.status.steps;
    view.tokens_at_iteration_start = view.status.scheduled_tokens;
    if (view.failed) continue;
    busy.push_back(b);
    phase.add_idle(BubbleRole::kRollout, std::max(0.0, seconds - b));
  }
  phase.add_phase(busy);
  nlohmann::json bubbles = phase.to_json(seconds);
  bubbles["work"] = work;
  return bubbles;
}

nlohmann::json IterationEngine::iteration(int64_t index) {
  check_input(layout_.trains(), "a rollout-only rank runs serve(), not iterations",
              "iteration engine");
  start_workers();
  const auto iteration_start = Clock::now();
  IterationRecord record;
  record.index = index;
  std::vector<int64_t> groups;
  std::vector<Claim> leases;  // the batch's claims, acked after the update
  double idle = 0.0, sorting = 0.0;
  int64_t swapped_bytes = 0;
  if (streams_) {
    stream_batch(index, record, groups, leases, idle, sorting);
  } else {
    if (swap_.enabled()) {
      timed_stage(record.stage_seconds, "swap_out", trace_, trainer_track_,
                  [&] { swapped_bytes = swap_.swap_out(workers_); });
    }
    BatchPlan plan;
    if (is_admitter()) {
      const auto wait_start = Clock::now();
      choose_batch(index, record, leases, plan.groups, plan.trained_versions, idle, sorting);
      if (trace_ != nullptr && idle > 0) {
        trace_->span(trainer_track_, "wait", wait_start, Clock::now(), {{"sorting_s", sorting}});
      }
      plan.sampling_rounds = record.sampling_rounds;
      plan.rewards = record.rewards;
    }
    if (trainers_) {
      // The wait for a batch has no bound (generation takes as long as it takes), so
      // it stays out of collectives, which time out: trainer 0 posts the batch on the
      // status board and the others poll for it.
      const std::string key = "batch/" + std::to_string(index);
      if (is_admitter()) {
        dock_->post_status(key, encode_batch_plan(plan));
      } else {
        plan = decode_batch_plan(await_status(key));
        record.sampling_rounds = plan.sampling_rounds;
        record.rewards = plan.rewards;
      }
    }
    groups = plan.groups;
    const std::vector<int64_t>& versions = plan.trained_versions;
    record.update.row_versions = versions;
    if (swap_.enabled()) {
      timed_stage(record.stage_seconds, "swap_in", trace_, trainer_track_,
                  [&] { swap_.swap_in(); });
    }
    // Every group dropped (dynamic sampling) in every round: no update this time.
    if (!groups.empty()) train_whole_batch(index, groups, versions, record);
  }
  if (is_admitter()) {
    for (const Claim& lease : leases) dock_->ack(lease);
    for (int64_t group : groups) prompts_.close(group);
    consumed_groups_ += static_cast<int64_t>(groups.size());
  }
  record.stage_seconds["wait"] = idle;
  ++version_;
  // Evaluation and export read setup.model after every iteration.
  if (publisher_->gathers_full_policy()) {
    timed_stage(record.stage_seconds, "gather", trace_, trainer_track_, [&] {
      publisher_->gather_full_policy(workers_.actor->model(), setup_.model, version_);
    });
  }
  if (version_ % config_.pipeline.sync_every == 0) {
    timed_stage(record.stage_seconds, "publish", trace_, trainer_track_, [&] {
      publish();
      if (is_admitter()) admit();
    });
  }
  trained_tokens_ += record.update.response_tokens;
  record.policy_version = version_;
  record.seconds = seconds_since(iteration_start);

  nlohmann::json line = iteration_metrics(record);
  BubbleAccounting trainer(1, 1);
  trainer.add_idle(BubbleRole::kTrainer, idle);
  trainer.add_sorting_wait(sorting);
  for (int64_t v : record.update.row_versions) trainer.add_staleness(index - v, 1);
  nlohmann::json bubbles = trainer.to_json(record.seconds);
  nlohmann::json rollout = nlohmann::json::object();
  if (is_admitter()) {
    refresh_instances();
    rollout = rollout_bubbles(record.seconds);
  }
  if (trainers_) broadcast_json(*trainers_, rollout, 0);
  // Counted at the batch, not at the instances: rows still generating are not yet
  // samples of the run (and are regenerated after a resume).
  samples_ += static_cast<int64_t>(record.rewards.scores.size());
  for (const char* key : {"skewness", "rollout_idle"}) bubbles[key] = rollout.value(key, 0.0);
  // Steps, scheduled tokens and busy seconds of every instance this iteration.
  if (rollout.contains("work")) line["rollout_work"] = rollout["work"];
  bubbles["padding_static_equivalent"] = padding_fraction({record.rewards.lengths});
  line["bubbles"] = bubbles;
  line["trained_groups"] = static_cast<int64_t>(groups.size());
  // Dynamic sampling: groups drawn for this batch and dropped (all rewards equal).
  line["dropped_groups"] = static_cast<int64_t>(record.rewards.groups.size() - groups.size());
  line["batch_groups"] = groups;
  if (swap_.enabled()) line["swapped_bytes"] = swapped_bytes;
  // Allgather-swap: bytes rank 0 received to build its inference shards (0 when the
  // inference layout is a split of the training one: every rank slices locally).
  if (const auto bytes = publisher_->reshard_bytes_moved()) line["reshard_bytes_moved"] = *bytes;
  line["rollout_version"] = published_version_;
  if (is_admitter()) {
    // How stale the dispatcher's view of the instances got (rollout_worker.h bounds it).
    line["instance_status_age_max_s"] = status_age_max_s_;
    status_age_max_s_ = 0.0;
    int64_t failed = 0, stolen = 0;
    for (const InstanceView& view : instances_) {
      failed += view.failed ? 1 : 0;
      stolen += view.status.stolen_groups;
    }
    line["failed_instances"] = failed;
    line["stolen_groups"] = stolen;  // cumulative: groups an idle instance took over
  }
  if (world_) line["ranks"] = world_->world_size();
  return line;
}

nlohmann::json IterationEngine::state() const {
  // Groups admitted but not yet trained are regenerated on resume (same group ids,
  // so the same sampling seeds); what was in flight is not saved.
  nlohmann::json pending = nlohmann::json::array();
  for (const PromptGroup& group : prompts_.open_groups())
    pending.push_back({group.group_id, group.example});
  return {{"prompts", prompts_.state()},
          {"pending", pending},
          {"version", version_},
          {"samples", samples_},
          {"trained_tokens", trained_tokens_},
          {"consumed_groups", consumed_groups_},
          {"refilled_groups", refilled_groups_},
          {"kl_reward_coef", workers_.kl_ctrl.value()}};
}

void IterationEngine::restore(const nlohmann::json& state) {
  check_input(threads_.empty(), "restore must come before the first iteration", "iteration engine");
  if (!layout_.trains()) return;
  version_ = state.at("version").get<int64_t>();
  trained_tokens_ = state.at("trained_tokens").get<int64_t>();
  samples_ = state.at("samples").get<int64_t>();
  workers_.kl_ctrl.restore(state.at("kl_reward_coef").get<double>());
  publish();  // setup.model is the restored full policy
  if (!is_admitter()) return;
  prompts_.restore(state.at("prompts"));
  if (state.contains("consumed_groups")) {
    consumed_groups_ = state.at("consumed_groups").get<int64_t>();
    refilled_groups_ = state.at("refilled_groups").get<int64_t>();
  } else {
    // A checkpoint of the schedules before the engine (sync, or async with its own
    // ledger): every finished version consumed one batch of groups, none pending.
    consumed_groups_ = state.value("trained_groups", version_ * batch_groups_);
  }
  for (const auto& entry : state.value("pending", nlohmann::json::array())) {
    admit_group(PromptGroup{entry.at(0).get<int64_t>(), entry.at(1).get<int64_t>()}, version_);
  }
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
  for (auto& worker : rollout_workers_) worker->stop();
  if (reward_worker_) reward_worker_->stop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
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

}  // namespace

std::unique_ptr<Schedule> make_iteration_engine(const ScheduleContext& context,
                                                std::optional<ProcessGroupHandle> world) {
  return std::make_unique<IterationEngine>(context, std::move(world));
}

}  // namespace aspen
