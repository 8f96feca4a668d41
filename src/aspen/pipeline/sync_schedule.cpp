#include "aspen/pipeline/sync_schedule.h"

#include <chrono>
#include <map>
#include <set>

#include "aspen/dock/in_process_transport.h"
#include "aspen/pipeline/bubble_accounting.h"
#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/pipeline/trace_writer.h"
#include "aspen/pipeline/training_state_swap.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/model_copy.h"
#include "aspen/util/seconds_since.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;

class SyncSchedule : public Schedule {
 public:
  explicit SyncSchedule(const ScheduleContext& context)
      : config_(context.config),
        setup_(context.setup),
        workers_(context.workers),
        trace_(context.trace),
        prompts_(static_cast<int64_t>(setup_.train_examples.size()), config_.train.seed),
        engine_(copy_model(setup_.model, torch::kFloat, setup_.rollout_device, /*trainable=*/false),
                rollout_engine_config(config_, setup_), setup_.tokenizer),
        dock_(std::make_shared<InProcessTransport>(
            std::make_shared<InProcessDock>(make_rl_schema(workers_.schema),
                                            DockControllerOptions{}, 1),
            0)),
        swap_(config_.placement.swap) {
    if (trace_ != nullptr) {
      rollout_track_ = trace_->track("rollout");
      trainer_track_ = trace_->track("trainer");
    }
  }

  nlohmann::json iteration(int64_t index) override;

  nlohmann::json state() const override {
    return sync_state(prompts_, counters_, workers_.kl_ctrl);
  }

  void restore(const nlohmann::json& state) override {
    restore_sync_state(state, prompts_, counters_, workers_.kl_ctrl);
    engine_.load_weights(counters_.version, policy_weights(setup_.model));
  }

  int64_t samples() const override { return counters_.samples; }
  int64_t trained_tokens() const override { return counters_.trained_tokens; }
  void stop() override { swap_.swap_in(); }

 private:
  // Rollout of `groups` into the dock; returns the rows added.
  int64_t rollout(const std::vector<PromptGroup>& groups);
  const TrainConfig& config_;
  RlSetup& setup_;
  RlWorkers& workers_;
  TraceWriter* trace_;
  int rollout_track_ = 0;
  int trainer_track_ = 0;
  PromptSource prompts_;
  RolloutEngine engine_;
  TransferDock dock_;
  TrainingStateSwap swap_;  // placement.swap: optimizer state out while the rollout runs
  SyncCounters counters_;
};

int64_t SyncSchedule::rollout(const std::vector<PromptGroup>& groups) {
  std::vector<GenerationRequest> requests;
  for (const PromptGroup& group : groups) requests.push_back(group_request(config_, setup_, group));
  const std::vector<Completion> completions = engine_.generate(std::move(requests));
  std::vector<RowInfo> infos;
  for (const Completion& c : completions) {
    RowInfo info;
    info.group_id = std::stoll(c.request_id);  // requests are named by their group
    info.group_size = static_cast<int32_t>(config_.rollout.n);
    info.tokens = static_cast<int64_t>(c.token_ids.size());  // per-token columns: response
    info.version = c.policy_versions.empty() ? counters_.version : c.policy_versions.front();
    infos.push_back(info);
  }
  dock_.put(infos, rollout_columns(completions));
  return static_cast<int64_t>(completions.size());
}

nlohmann::json SyncSchedule::iteration(int64_t index) {
  const RolloutSection& rollout_config = config_.rollout;
  const AlgorithmSection& algorithm = config_.algorithm;
  const auto iteration_start = Clock::now();
  IterationRecord record;
  record.index = index;
  nlohmann::json& stages = record.stage_seconds;

  int64_t swapped_bytes = 0;
  if (swap_.enabled()) {
    timed_stage(stages, "swap_out", trace_, trainer_track_,
                [&] { swapped_bytes = swap_.swap_out(workers_); });
  }
  // 1-2. Rollout and reward, in rounds when DAPO dynamic sampling must refill the batch.
  std::set<int64_t> kept_groups, drawn_groups;
  int64_t rows = 0;
  record.sampling_rounds = 0;
  while (static_cast<int64_t>(kept_groups.size()) < rollout_config.prompts_per_iteration &&
         record.sampling_rounds < (algorithm.dynamic_sampling ? 4 : 1)) {
    ++record.sampling_rounds;
    const std::vector<PromptGroup> groups = prompts_.next(rollout_config.prompts_per_iteration -
                                                          static_cast<int64_t>(kept_groups.size()));
    int64_t added = 0;
    timed_stage(stages, "rollout", trace_, rollout_track_, [&] { added = rollout(groups); });
    rows += added;
    RewardStats round;
    timed_stage(stages, "reward", trace_, trainer_track_, [&] {
      round = reward_stage(config_, setup_, &prompts_, dock_, claim_rows(added));
    });
    add_sampling_round(groups, round, algorithm.dynamic_sampling, drawn_groups, kept_groups,
                       record.rewards);
  }

  if (swap_.enabled())
    timed_stage(stages, "swap_in", trace_, trainer_track_, [&] { swap_.swap_in(); });
  const ClaimOptions all_rows = claim_rows(rows);
  if (workers_.reference) {
    timed_stage(stages, "reference", trace_, trainer_track_,
                [&] { reference_stage(*workers_.reference, dock_, all_rows); });
  }
  const bool on_policy = config_.train.epochs == 1 && (config_.train.mini_batch_size <= 0 ||
                                                       config_.train.mini_batch_size >= rows);
  timed_stage(stages, "old_logprobs", trace_, trainer_track_,
              [&] { old_logprob_stage(*workers_.actor, dock_, all_rows, on_policy); });
  if (workers_.critic) {
    timed_stage(stages, "values", trace_, trainer_track_,
                [&] { value_stage(*workers_.critic, dock_, all_rows); });
  }
  timed_stage(stages, "advantage", trace_, trainer_track_, [&] {
    record.advantages = advantage_stage(algorithm, workers_.kl_ctrl, dock_, all_rows);
  });
  timed_stage(stages, "update", trace_, trainer_track_, [&] {
    record.update = update_stage(config_, workers_, dock_, all_rows, &kept_groups,
                                 config_.train.seed + static_cast<uint64_t>(index));
  });
  timed_stage(stages, "publish", trace_, trainer_track_,
              [&] { engine_.load_weights(++counters_.version, policy_weights(setup_.model)); });
  for (int64_t group : drawn_groups) prompts_.close(group);

  counters_.samples += rows;
  counters_.trained_tokens += record.update.response_tokens;
  record.policy_version = counters_.version;
  record.seconds = seconds_since(iteration_start);
  nlohmann::json line = iteration_metrics(record);
  // Bubbles of the baseline: one instance, one trainer, strictly alternating. Packed
  // rollout and training compute no pad slots; padding_static_equivalent is what a
  // static batch padded to the longest response would have wasted.
  const double rollout_s = stages.value("rollout", 0.0);
  line["bubbles"] = sync_bubbles(record, rollout_s, 0.0);
  if (swap_.enabled()) line["swapped_bytes"] = swapped_bytes;
  return line;
}

}  // namespace

nlohmann::json sync_state(const PromptSource& prompts, const SyncCounters& counters,
                          const KlController& kl) {
  return {{"prompts", prompts.state()},
          {"version", counters.version},
          {"samples", counters.samples},
          {"trained_tokens", counters.trained_tokens},
          {"kl_reward_coef", kl.value()}};
}

void restore_sync_state(const nlohmann::json& state, PromptSource& prompts, SyncCounters& counters,
                        KlController& kl) {
  prompts.restore(state.at("prompts"));
  counters.version = state.at("version").get<int64_t>();
  counters.samples = state.at("samples").get<int64_t>();
  counters.trained_tokens = state.at("trained_tokens").get<int64_t>();
  kl.restore(state.at("kl_reward_coef").get<double>());
}

void add_sampling_round(const std::vector<PromptGroup>& groups, const RewardStats& round,
                        bool dynamic_sampling, std::set<int64_t>& drawn, std::set<int64_t>& kept,
                        RewardStats& all) {
  for (const PromptGroup& group : groups) drawn.insert(group.group_id);
  for (int64_t group : round.groups) {
    if (round.informative.count(group) || !dynamic_sampling) kept.insert(group);
  }
  all.scores.insert(all.scores.end(), round.scores.begin(), round.scores.end());
  all.lengths.insert(all.lengths.end(), round.lengths.begin(), round.lengths.end());
  all.versions.insert(all.versions.end(), round.versions.begin(), round.versions.end());
}

nlohmann::json sync_bubbles(const IterationRecord& record, double rollout_seconds,
                            double skewness) {
  const double wall = std::max(record.seconds, 1e-9);
  return {{"padding", 0.0},
          {"padding_rollout", 0.0},
          {"padding_train", 0.0},
          {"padding_static_equivalent", padding_fraction({record.rewards.lengths})},
          {"skewness", skewness},
          {"sorting", 0.0},
          {"trainer_idle", rollout_seconds / wall},
          {"rollout_idle", 1.0 - rollout_seconds / wall},
          {"staleness_histogram", {{"0", record.update.rows}}}};
}

EngineConfig rollout_engine_config(const TrainConfig& config, const RlSetup& setup) {
  EngineConfig engine;
  engine.kv_cache_bytes = config.rollout.kv_cache_mb << 20;
  engine.max_num_seqs = config.rollout.max_num_seqs;
  engine.max_num_batched_tokens = config.rollout.max_num_batched_tokens;
  engine.eos_token_ids = setup.eos_token_ids;
  engine.seed = config.train.seed;
  return engine;
}

SamplingParams rollout_sampling(const TrainConfig& config, int64_t group_id) {
  SamplingParams params;
  params.temperature = config.rollout.temperature;
  params.top_p = config.rollout.top_p;
  params.top_k = config.rollout.top_k;
  params.max_tokens = config.rollout.max_tokens;
  params.seed = config.train.seed * 1000003ULL + static_cast<uint64_t>(group_id);
  if (config.rollout.long_tail_fraction > 0.0) {
    // A fixed pseudo-random draw per group (SplitMix64 finaliser of the group id).
    uint64_t z = static_cast<uint64_t>(group_id) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    if (u < config.rollout.long_tail_fraction) params.min_tokens = params.max_tokens;
  }
  return params;
}

GenerationRequest group_request(const TrainConfig& config, const RlSetup& setup,
                                const PromptGroup& group) {
  GenerationRequest request;
  request.id = std::to_string(group.group_id);
  request.prompt =
      setup.tokenizer->encode(setup.train_examples[static_cast<size_t>(group.example)].prompt_text);
  request.params = rollout_sampling(config, group.group_id);
  request.n = config.rollout.n;
  return request;
}

double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens) {
  torch::NoGradGuard no_grad;
  EngineConfig config;
  config.eos_token_ids = setup.eos_token_ids;
  config.kv_cache_bytes = 64LL << 20;
  config.max_num_seqs = 256;
  RolloutEngine engine(setup.model, config, setup.tokenizer);
  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < examples.size(); ++i) {
    GenerationRequest request;
    request.id = std::to_string(i);
    request.prompt = setup.tokenizer->encode(examples[i].prompt_text);
    request.params = params;
    requests.push_back(std::move(request));
  }
  const auto completions = engine.generate(std::move(requests));
  int64_t correct = 0;
  for (const Completion& c : completions) {
    const TaskExample& example = examples[c.request_index];
    const RewardInput input{example.prompt_text,
                            setup.tokenizer->decode(c.token_ids, /*skip_special_tokens=*/true),
                            example.ground_truth};
    correct += setup.verifier->score(input) >= 1.0 ? 1 : 0;
  }
  return examples.empty() ? 0.0
                          : static_cast<double>(correct) / static_cast<double>(examples.size());
}

std::unique_ptr<Schedule> make_sync_schedule(const ScheduleContext& context) {
  return std::make_unique<SyncSchedule>(context);
}

}  // namespace aspen
