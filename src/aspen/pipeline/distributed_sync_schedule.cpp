#include "aspen/pipeline/distributed_sync_schedule.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "aspen/dock/claim_codec.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/parallel/resharder.h"
#include "aspen/pipeline/bubble_accounting.h"
#include "aspen/pipeline/distributed_dock.h"
#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/pipeline/sync_schedule.h"
#include "aspen/pipeline/trace_writer.h"
#include "aspen/pipeline/training_state_swap.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/seconds_since.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> as_doubles(const std::vector<int64_t>& values) {
  return std::vector<double>(values.begin(), values.end());
}

std::vector<int64_t> as_ints(const std::vector<double>& values) {
  std::vector<int64_t> out;
  for (double v : values) out.push_back(static_cast<int64_t>(v));
  return out;
}

// Every rank's reward statistics, concatenated in rank order.
RewardStats gather_rewards(ProcessGroupHandle& world, const RewardStats& local) {
  RewardStats all;
  all.scores = all_gather_doubles(world, local.scores);
  all.lengths = as_ints(all_gather_doubles(world, as_doubles(local.lengths)));
  all.versions = as_ints(all_gather_doubles(world, as_doubles(local.versions)));
  const std::vector<int64_t> groups(local.groups.begin(), local.groups.end());
  for (int64_t g : as_ints(all_gather_doubles(world, as_doubles(groups)))) all.groups.insert(g);
  const std::vector<int64_t> informative(local.informative.begin(), local.informative.end());
  for (int64_t g : as_ints(all_gather_doubles(world, as_doubles(informative)))) {
    all.informative.insert(g);
  }
  return all;
}

class DistributedSyncSchedule : public Schedule {
 public:
  DistributedSyncSchedule(const ScheduleContext& context, ProcessGroupHandle world)
      : config_(context.config),
        setup_(context.setup),
        workers_(context.workers),
        trace_(context.trace),
        world_(std::move(world)),
        train_tp_(config_.placement.train_tp),
        dp_rank_(world_.rank() / train_tp_),
        writes_(world_.rank() % train_tp_ == 0),
        prompts_(static_cast<int64_t>(setup_.train_examples.size()), config_.train.seed),
        dock_(make_distributed_dock(world_, make_rl_schema(workers_.schema),
                                    DockControllerOptions{}.capacity_rows)),
        swap_(config_.placement.swap) {
    const Placement& placement = config_.placement;
    const int rollout_tp = placement.rollout_tp;
    const int trainers = placement.train_dp * placement.train_tp;
    TensorParallel instance_tp;  // the rollout instance's TP group (rollout TP > 1)
    instances_ = placement.rollout_instances;
    if (placement.mode == "colocated") {
      resharder_ = std::make_unique<Resharder>(world_, reshard_plan(placement, rollout_tp),
                                               qwen_layout(setup_.model->config));
      instance_ = resharder_->placement().replica;
      serves_rows_ = resharder_->placement().tp_rank == 0;
      // The t ranks of an instance step together; its TP rank = the inference tp_rank.
      if (rollout_tp > 1) {
        const ReshardPlan plan = resharder_->plan();
        for (int replica = 0; replica < instances_; ++replica) {
          std::vector<int> members(static_cast<size_t>(rollout_tp));
          for (int r = 0; r < world_.world_size(); ++r) {
            const InferencePlacement at = inference_placement(plan, r);
            if (at.replica == replica) members[static_cast<size_t>(at.tp_rank)] = r;
          }
          if (auto group = world_.new_subgroup(members)) instance_tp = TensorParallel::over(*group);
        }
      }
      // Train TP > 1 keeps setup.model (the full policy: evaluation, export) fresh
      // through a gather to TP 1, unless the inference layout is TP 1 already.
      if (train_tp_ > 1 && rollout_tp > 1) {
        full_resharder_ = std::make_unique<Resharder>(world_, reshard_plan(placement, 1),
                                                      qwen_layout(setup_.model->config));
      }
    } else {
      // Disaggregated: ranks [0, trainers) train, the rest serve; rollout rank q belongs
      // to instance q / rollout_tp (placement.h). Every rank creates every subgroup.
      trains_ = world_.rank() < trainers;
      serves_ = !trains_;
      writes_ = writes_ && trains_;
      std::vector<int> train_ranks, publish_ranks = {0};
      for (int r = 0; r < trainers; ++r) train_ranks.push_back(r);
      for (int r = trainers; r < world_.world_size(); ++r) publish_ranks.push_back(r);
      std::optional<ProcessGroupHandle> train_group = world_.new_subgroup(train_ranks);
      publish_group_ = world_.new_subgroup(publish_ranks);
      for (int instance = 0; instance < instances_; ++instance) {
        std::vector<int> members;
        for (int t = 0; t < rollout_tp; ++t)
          members.push_back(trainers + instance * rollout_tp + t);
        if (rollout_tp == 1) continue;
        if (auto group = world_.new_subgroup(members)) instance_tp = TensorParallel::over(*group);
      }
      if (serves_) {
        instance_ = (world_.rank() - trainers) / rollout_tp;
        serves_rows_ = (world_.rank() - trainers) % rollout_tp == 0;
      }
      // The trainers gather their TP shards into whole tensors for the rollout ranks.
      if (trains_ && train_tp_ > 1) {
        full_resharder_ = std::make_unique<Resharder>(*train_group, reshard_plan(placement, 1),
                                                      qwen_layout(setup_.model->config));
      }
    }
    if (serves_) {
      QwenForCausalLM rollout_model(setup_.model->config, instance_tp);
      rollout_model->to(setup_.rollout_device);
      {
        torch::NoGradGuard no_grad;
        std::map<std::string, torch::Tensor> full;
        for (const auto& [name, tensor] : setup_.model->hf_state()) full[name] = tensor.detach();
        rollout_model->load_state(full, "rollout weights");
      }
      for (auto& p : rollout_model->parameters()) p.set_requires_grad(false);
      engine_ = std::make_unique<RolloutEngine>(
          rollout_model, rollout_engine_config(config_, setup_), setup_.tokenizer);
    }
    if (trace_ != nullptr) {
      rollout_track_ = trace_->track("rollout (rank " + std::to_string(world_.rank()) + ")");
      trainer_track_ = trace_->track("trainer (rank " + std::to_string(world_.rank()) + ")");
    }
  }

  nlohmann::json iteration(int64_t index) override;

  nlohmann::json state() const override {
    return sync_state(prompts_, counters_, workers_.kl_ctrl);
  }

  void restore(const nlohmann::json& state) override {
    restore_sync_state(state, prompts_, counters_, workers_.kl_ctrl);
    publish();
  }

  void stop() override { swap_.swap_in(); }

  int64_t samples() const override { return counters_.samples; }
  int64_t trained_tokens() const override { return counters_.trained_tokens; }

 private:
  static ShardLayout qwen_layout(const ModelConfig& config) {
    return [config](const std::string& name) { return qwen_shard_spec(name, config); };
  }
  static ReshardPlan reshard_plan(const Placement& placement, int infer_tp) {
    ReshardPlan plan;
    plan.train_dp = placement.train_dp;
    plan.train_tp = placement.train_tp;
    plan.infer_tp = infer_tp;
    plan.dtype = torch::kFloat;  // the rollout engine computes in fp32
    return plan;
  }

  bool is_root() const { return world_.rank() == 0; }
  // This rank's groups among `groups` (round robin by position).
  std::vector<PromptGroup> my_groups(const std::vector<PromptGroup>& groups) const;
  // Generates and scores this rank's groups; the statistics are this rank's rows.
  RewardStats rollout_and_score(const std::vector<PromptGroup>& groups);
  // Rank 0 claims `rows` rows for `consumer` (balanced over the data-parallel ranks
  // when `balanced`), every rank receives the claim; returns this rank's share (the
  // tensor-parallel peers of a data-parallel rank share one share).
  Claim shared_claim(const std::string& consumer, int64_t rows, bool balanced);
  // After every rank computed on its share: rank 0 acks the claim.
  void finish(const Claim& share);
  void publish();

  const TrainConfig& config_;
  RlSetup& setup_;
  RlWorkers& workers_;
  TraceWriter* trace_;
  ProcessGroupHandle world_;
  const int train_tp_;
  const int dp_rank_;  // which data-parallel share this rank trains on
  bool writes_;        // training TP rank 0: writes the share's output columns
  int rollout_track_ = 0;
  int trainer_track_ = 0;
  PromptSource prompts_;
  DistributedDock dock_;
  // Colocated: training layout -> this rank's rollout shard. Disaggregated: none.
  std::unique_ptr<Resharder> resharder_;
  // Training layout -> TP 1 on the trainers: colocated when both layouts are TP > 1
  // (for setup.model), disaggregated when training is TP > 1 (for the rollout ranks).
  std::unique_ptr<Resharder> full_resharder_;
  std::optional<ProcessGroupHandle> publish_group_;  // disaggregated: rank 0 + rollout ranks
  std::unique_ptr<RolloutEngine> engine_;            // ranks that serve rollout
  bool trains_ = true;                               // a training rank (every rank when colocated)
  bool serves_ = true;                               // a rollout rank (every rank when colocated)
  int instance_ = 0;                                 // the rollout instance this rank serves
  int instances_ = 1;
  bool serves_rows_ = true;  // rollout TP rank 0: puts its instance's rows into the dock
  TrainingStateSwap swap_;
  SyncCounters counters_;
};

std::vector<PromptGroup> DistributedSyncSchedule::my_groups(
    const std::vector<PromptGroup>& groups) const {
  std::vector<PromptGroup> mine;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(instances_)) == instance_)
      mine.push_back(groups[i]);
  }
  return mine;
}

RewardStats DistributedSyncSchedule::rollout_and_score(const std::vector<PromptGroup>& groups) {
  TransferDock& dock = *dock_.dock;
  std::vector<GenerationRequest> requests;
  std::vector<int64_t> ids;
  for (const PromptGroup& group : groups) {
    requests.push_back(group_request(config_, setup_, group));
    ids.push_back(group.group_id);
  }
  if (requests.empty() || !serves_) return {};
  // Every TP rank of the instance generates (the same samples: the engine's
  // collectives keep them in step); its TP rank 0 alone keeps the rows.
  const std::vector<Completion> completions = engine_->generate(std::move(requests));
  if (!serves_rows_) return {};
  std::vector<RowInfo> infos;
  for (const Completion& c : completions) {
    RowInfo info;
    info.group_id = std::stoll(c.request_id);
    info.group_size = static_cast<int32_t>(config_.rollout.n);
    info.tokens = static_cast<int64_t>(c.token_ids.size());
    info.version = c.policy_versions.empty() ? counters_.version : c.policy_versions.front();
    infos.push_back(info);
  }
  dock.put(infos, rollout_columns(completions));
  ClaimOptions mine = claim_rows(static_cast<int64_t>(completions.size()), /*whole_groups=*/true);
  mine.groups = ids;  // only this rank's rows: the others score theirs concurrently
  return reward_stage(config_, setup_, &prompts_, dock, mine);
}

Claim DistributedSyncSchedule::shared_claim(const std::string& consumer, int64_t rows,
                                            bool balanced) {
  std::string encoded;
  if (is_root()) {
    ClaimOptions options = claim_rows(rows);
    if (balanced) options.balance_ranks = config_.placement.train_dp;
    encoded = encode_claim(dock_.dock->claim(consumer, options));
  }
  broadcast_bytes(world_, encoded, 0);
  if (!trains_) return Claim{};  // a rollout rank: nothing to compute
  const Claim claim = decode_claim(encoded);
  return balanced ? share_of(claim, dp_rank_) : claim;
}

void DistributedSyncSchedule::finish(const Claim& share) {
  world_.barrier();                       // every share's columns are written
  if (is_root()) dock_.dock->ack(share);  // the lease covers every rank's share
}

void DistributedSyncSchedule::publish() {
  QwenForCausalLM& trained = workers_.actor->model();
  const auto shards = trained->hf_state();
  auto as_map = [](const WeightSet& set) {
    return std::map<std::string, torch::Tensor>(set.tensors.begin(), set.tensors.end());
  };
  torch::NoGradGuard no_grad;
  if (resharder_) {  // colocated
    const std::map<std::string, torch::Tensor> tensors =
        as_map(*resharder_->reshard(shards, counters_.version));
    engine_->load_weights(counters_.version, tensors);
    // Train TP > 1: setup.model is the full policy (evaluation, export), refreshed from
    // the full weights - the rollout's own when it runs at TP 1.
    if (trained.ptr() != setup_.model.ptr()) {
      setup_.model->load_state(
          full_resharder_ ? as_map(*full_resharder_->reshard(shards, counters_.version)) : tensors,
          "resharded policy");
    }
    return;
  }
  // Disaggregated: the trainers assemble whole tensors (a TP gather), train rank 0
  // broadcasts them to the rollout ranks, and each instance takes its shards.
  std::map<std::string, torch::Tensor> full;
  if (trains_) {
    if (full_resharder_) {
      full = as_map(*full_resharder_->reshard(shards, counters_.version));
    } else {
      for (const auto& [name, tensor] : shards) full[name] = tensor.detach();
    }
  }
  if (publish_group_) {
    for (const auto& [name, tensor] : setup_.model->hf_state()) {
      torch::Tensor value = world_.rank() == 0 ? full.at(name).contiguous().clone()
                                               : torch::empty_like(tensor).contiguous();
      publish_group_->broadcast(value, 0);
      full[name] = value;
    }
  }
  if (serves_) engine_->load_weights(counters_.version, full);
  if (!trains_ || trained.ptr() != setup_.model.ptr())
    setup_.model->load_state(full, "published policy");
}

nlohmann::json DistributedSyncSchedule::iteration(int64_t index) {
  const AlgorithmSection& algorithm = config_.algorithm;
  const int64_t batch_groups = config_.rollout.prompts_per_iteration;
  const auto iteration_start = Clock::now();
  IterationRecord record;
  record.index = index;
  nlohmann::json& stages = record.stage_seconds;
  int64_t swapped_bytes = 0;  // optimizer state and gradients out during the rollout
  if (swap_.enabled()) {
    timed_stage(stages, "swap_out", trace_, trainer_track_,
                [&] { swapped_bytes = swap_.swap_out(workers_); });
  }

  // 1. Rollout and reward on every rank, in rounds when DAPO must refill the batch.
  std::set<int64_t> kept_groups, drawn_groups;
  int64_t rows = 0;
  record.sampling_rounds = 0;
  double rollout_seconds = 0.0;
  while (static_cast<int64_t>(kept_groups.size()) < batch_groups &&
         record.sampling_rounds < (algorithm.dynamic_sampling ? 4 : 1)) {
    ++record.sampling_rounds;
    const std::vector<PromptGroup> groups =
        prompts_.next(batch_groups - static_cast<int64_t>(kept_groups.size()));
    RewardStats local;
    const auto start = Clock::now();
    timed_stage(stages, "rollout", trace_, rollout_track_,
                [&] { local = rollout_and_score(my_groups(groups)); });
    rollout_seconds += seconds_since(start);
    RewardStats round;
    timed_stage(stages, "gather", trace_, trainer_track_,
                [&] { round = gather_rewards(world_, local); });
    rows += static_cast<int64_t>(round.scores.size());
    add_sampling_round(groups, round, algorithm.dynamic_sampling, drawn_groups, kept_groups,
                       record.rewards);
  }
  if (swap_.enabled())
    timed_stage(stages, "swap_in", trace_, trainer_track_, [&] { swap_.swap_in(); });

  // 2. The trainer-side stages, each on this rank's share of one balanced claim.
  if (workers_.reference) {
    timed_stage(stages, "reference", trace_, trainer_track_, [&] {
      const Claim share = shared_claim(rl_consumers::kReference, rows, true);
      reference_stage(*workers_.reference, *dock_.dock, share, writes_);
      finish(share);
    });
  }
  const bool on_policy = config_.train.epochs == 1 && (config_.train.mini_batch_size <= 0 ||
                                                       config_.train.mini_batch_size >= rows);
  timed_stage(stages, "old_logprobs", trace_, trainer_track_, [&] {
    const Claim share = shared_claim(rl_consumers::kOldLogprobs, rows, true);
    old_logprob_stage(*workers_.actor, *dock_.dock, share, on_policy, writes_);
    finish(share);
  });
  if (workers_.critic) {
    timed_stage(stages, "values", trace_, trainer_track_, [&] {
      const Claim share = shared_claim(rl_consumers::kValues, rows, true);
      value_stage(*workers_.critic, *dock_.dock, share, writes_);
      finish(share);
    });
  }
  timed_stage(stages, "advantage", trace_, trainer_track_, [&] {
    nlohmann::json stats;
    if (is_root()) {
      record.advantages =
          advantage_stage(algorithm, workers_.kl_ctrl, *dock_.dock, claim_rows(rows));
      stats = {record.advantages.rows, record.advantages.kl_in_reward, record.advantages.kl_coef,
               workers_.kl_ctrl.value()};
    }
    broadcast_json(world_, stats, 0);  // also: every advantage is written
    record.advantages.rows = stats.at(0).get<int64_t>();
    record.advantages.kl_in_reward = stats.at(1).get<double>();
    record.advantages.kl_coef = stats.at(2).get<double>();
    workers_.kl_ctrl.restore(stats.at(3).get<double>());  // the same controller everywhere
  });
  timed_stage(stages, "update", trace_, trainer_track_, [&] {
    const Claim actor = shared_claim(rl_consumers::kActorUpdate, rows, true);
    const Claim critic =
        workers_.critic ? shared_claim(rl_consumers::kCriticUpdate, rows, true) : Claim{};
    record.update = update_stage(config_, workers_, *dock_.dock, actor, critic, &kept_groups,
                                 config_.train.seed + static_cast<uint64_t>(index));
    finish(actor);
    if (workers_.critic) finish(critic);
    // The update's metrics are global already; its row and token counts are this rank's
    // (and its tensor-parallel peers': counted once).
    const double peers = static_cast<double>(train_tp_);
    torch::Tensor counts =
        torch::tensor({static_cast<double>(record.update.rows) / peers,
                       static_cast<double>(record.update.response_tokens) / peers},
                      torch::kFloat64);
    world_.all_reduce_sum(counts);
    record.update.rows = std::llround(counts[0].item<double>());
    record.update.response_tokens = std::llround(counts[1].item<double>());
    record.update.row_versions = record.rewards.versions;
  });
  ++counters_.version;
  timed_stage(stages, "publish", trace_, trainer_track_, [&] { publish(); });
  for (int64_t group : drawn_groups) prompts_.close(group);

  counters_.samples += rows;
  counters_.trained_tokens += record.update.response_tokens;
  record.policy_version = counters_.version;
  // The slowest rank's seconds: every rank leaves the iteration together.
  torch::Tensor seconds =
      torch::tensor({seconds_since(iteration_start), rollout_seconds}, torch::kFloat64);
  world_.all_reduce(seconds, ReduceOp::kMax);
  record.seconds = seconds[0].item<double>();
  nlohmann::json line = iteration_metrics(record);
  // The rollout phase is a barrier over the instances: skewness is the instances'
  // idle share of it (each instance's busy time against the slowest).
  const std::vector<double> gathered =
      all_gather_doubles(world_, {serves_ ? 1.0 : 0.0, rollout_seconds});
  std::vector<double> busy;  // the rollout ranks'
  for (size_t r = 0; r + 1 < gathered.size(); r += 2) {
    if (gathered[r] > 0.5) busy.push_back(gathered[r + 1]);
  }
  BubbleAccounting phase(static_cast<int>(busy.size()), world_.world_size());
  phase.add_phase(busy);
  const double rollout_s = seconds[1].item<double>();
  line["bubbles"] = sync_bubbles(record, rollout_s, phase.to_json(record.seconds).at("skewness"));
  line["ranks"] = world_.world_size();
  if (swap_.enabled()) line["swapped_bytes"] = swapped_bytes;
  return line;
}

}  // namespace

std::unique_ptr<Schedule> make_distributed_sync_schedule(const ScheduleContext& context,
                                                         ProcessGroupHandle world) {
  return std::make_unique<DistributedSyncSchedule>(context, std::move(world));
}

}  // namespace aspen
