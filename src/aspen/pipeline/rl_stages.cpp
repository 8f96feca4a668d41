#include "aspen/pipeline/rl_stages.h"

#include <algorithm>
#include <map>

#include "aspen/algo/algo.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen {
namespace {

std::vector<int64_t> response_lengths(const ColumnData& responses) {
  std::vector<int64_t> lengths;
  for (const auto& r : responses.values) lengths.push_back(r.numel());
  return lengths;
}

torch::Tensor packed_column(const ColumnData& column) {
  if (column.values.empty()) return torch::zeros({0});
  return torch::cat(column.values).to(torch::kFloat32);
}

// Outcome estimators: per-token advantages from per-row scores.
torch::Tensor outcome_advantages(AlgorithmName algorithm, double gamma,
                                 const torch::Tensor& scores, const torch::Tensor& group_ids,
                                 const PackedSeqs& packed, const torch::Tensor& token_rewards) {
  if (algorithm == AlgorithmName::kGrpo || algorithm == AlgorithmName::kDapo) {
    return grpo_advantages(scores, group_ids, packed);
  }
  if (algorithm == AlgorithmName::kDrGrpo) {
    GrpoOptions options;
    options.norm_by_std = false;
    return grpo_advantages(scores, group_ids, packed, options);
  }
  if (algorithm == AlgorithmName::kRloo) return rloo_advantages(scores, group_ids, packed);
  if (algorithm == AlgorithmName::kReinforcePpBaseline) {
    return reinforce_pp_baseline_advantages(scores, group_ids, packed);
  }
  return reinforce_pp_advantages(token_rewards, packed, gamma).advantages;
}

KlController make_kl_controller(const AlgorithmSection& a) {
  if (!a.kl_in_reward) return KlController::fixed(0.0);
  if (a.kl_ctrl == KlControl::kAdaptive) {
    return KlController::adaptive(a.kl_reward_coef, a.kl_target, a.kl_horizon);
  }
  return KlController::fixed(a.kl_reward_coef);
}

}  // namespace

void load_named_parameters(torch::nn::Module& module,
                           const std::map<std::string, torch::Tensor>& weights,
                           const std::string& source) {
  torch::NoGradGuard no_grad;
  const auto params = module.named_parameters(/*recurse=*/true);
  check_input(params.size() == weights.size(),
              "holds " + std::to_string(weights.size()) + " tensors, the model has " +
                  std::to_string(params.size()) + " parameters",
              source);
  for (const auto& item : params) {
    const auto it = weights.find(item.key());
    check_input(it != weights.end(), "missing parameter " + item.key(), source);
    check_input(it->second.sizes() == item.value().sizes(), "wrong shape for " + item.key(),
                source);
  }
  for (const auto& item : params) item.value().copy_(weights.at(item.key()));
}

RlWorkers::RlWorkers(const TrainConfig& config, RlSetup& setup, const SavedWorkerWeights* saved,
                     std::optional<ProcessGroupHandle> data_parallel,
                     const TensorParallel& tensor_parallel, const ExpertParallel& expert_parallel,
                     std::optional<ProcessGroupHandle> expert_data_parallel)
    : kl_ctrl(make_kl_controller(config.algorithm)) {
  const TrainSection& train = config.train;
  ActorOptions actor_options;
  actor_options.trainer = trainer_options(train, train.lr, train.iterations);
  actor_options.head.temperature = 1.0;
  actor_options.head.gemm_in_input_dtype =
      train.head_gemm_bf16 && train.compute_dtype == ComputeDtype::kBf16;
  actor_options.data_parallel.group = data_parallel;
  QwenForCausalLM trained = setup.model;
  if (tensor_parallel.enabled()) {
    check_input(config.algorithm.name != AlgorithmName::kPpo, "the critic is not tensor-parallel",
                "algorithm.name", "use placement.train.tp=1 for ppo");
  }
  if (expert_parallel.enabled()) {
    check_input(setup.model->config.is_moe(), "needs a mixture-of-experts model",
                "placement.train.ep", "use placement.train.ep=1 for a dense model");
  }
  if (tensor_parallel.enabled() || expert_parallel.enabled()) {
    trained = QwenForCausalLM(setup.model->config, tensor_parallel, expert_parallel);
    trained->to(setup.train_device);
    std::map<std::string, torch::Tensor> full;
    for (const auto& [name, tensor] : setup.model->hf_state()) full[name] = tensor.detach();
    trained->load_state(full, "policy, split for tensor and expert parallelism");
  }
  if (expert_parallel.enabled()) {
    const int64_t experts = setup.model->config.moe.num_experts;
    const int64_t first = expert_parallel.first_local_expert(experts);
    log_info("actor: expert-parallel rank ", expert_parallel.rank, " of ", expert_parallel.size,
             " trains experts [", first, ", ", first + expert_parallel.local_expert_count(experts),
             ") of ", experts, " per sparse layer",
             expert_parallel.replicated_tokens ? " (over its tensor-parallel group)" : "");
    if (!expert_parallel.replicated_tokens) {
      // EP inside DP: an expert's gradient is summed over the ranks holding it only.
      actor_options.data_parallel.is_expert = is_expert_parameter;
      actor_options.data_parallel.expert_group = expert_data_parallel;
    }
  }
  actor = std::make_unique<ActorTrainer>(trained, actor_options);
  schema.kl_in_reward = config.algorithm.kl_in_reward;
  schema.with_reference = config.algorithm.kl_coef != 0.0 || config.algorithm.kl_in_reward;
  schema.with_critic = config.algorithm.name == AlgorithmName::kPpo;
  schema.with_routing = setup.model->config.is_moe();
  if (schema.with_reference) {
    reference = std::make_unique<ReferencePolicy>(trained, ReferenceOptions{});
    if (saved != nullptr) reference->model()->load_state(saved->reference, "checkpoint reference");
  }
  if (schema.with_critic) {
    CriticModel critic_model = critic_from_policy(setup.model);
    if (saved != nullptr) load_named_parameters(*critic_model, saved->critic, "checkpoint critic");
    DataParallelConfig critic_dp;
    critic_dp.group = data_parallel;
    critic = std::make_unique<CriticTrainer>(
        critic_model, trainer_options(train, train.critic_lr, train.iterations), critic_dp);
  }
}

std::map<std::string, torch::Tensor> policy_weights(const QwenForCausalLM& model) {
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : model->hf_state()) weights[name] = tensor.detach().clone();
  return weights;
}

ClaimOptions claim_rows(int64_t rows, bool whole_groups) {
  ClaimOptions options;
  options.max_rows = rows;
  options.min_rows = rows;
  options.whole_groups = whole_groups;
  options.lease_s = 24.0 * 3600.0;
  return options;
}

void RewardStats::append(const RewardStats& other) {
  scores.insert(scores.end(), other.scores.begin(), other.scores.end());
  lengths.insert(lengths.end(), other.lengths.begin(), other.lengths.end());
  versions.insert(versions.end(), other.versions.begin(), other.versions.end());
  row_groups.insert(row_groups.end(), other.row_groups.begin(), other.row_groups.end());
  groups.insert(other.groups.begin(), other.groups.end());
  informative.insert(other.informative.begin(), other.informative.end());
}

void reward_stage(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                  const Claim& claim) {
  const AlgorithmSection& algorithm = config.algorithm;
  if (claim.empty()) return;
  const auto columns = dock.get(claim);
  const ColumnData& responses = find_column(columns, rl_columns::kResponse);
  const ColumnData& examples = find_column(columns, rl_columns::kExample);
  ColumnData scores{rl_columns::kScores, {}};
  ColumnData verifier_scores{rl_columns::kVerifierScore, {}};
  // Inputs first, then one score_batch() per verifier: an external reward (a command,
  // a service) then sees the whole claim as one batch instead of a call per row.
  std::vector<RewardInput> inputs;
  std::vector<int64_t> lengths;
  std::map<const Verifier*, std::vector<size_t>> rows_by_verifier;
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const RowInfo& info = claim.rows[i].info;
    const torch::Tensor r = responses.values[i].to(torch::kInt64).contiguous();
    const std::vector<TokenId> response(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
    const int64_t example_index = examples.values[i].item<int64_t>();
    check_input(
        example_index >= 0 && example_index < static_cast<int64_t>(setup.train_examples.size()),
        "example " + std::to_string(example_index) + " out of range",
        "group " + std::to_string(info.group_id));
    const TaskExample& example = setup.train_examples[static_cast<size_t>(example_index)];
    inputs.push_back(RewardInput{example.prompt_text,
                                 setup.tokenizer->decode(response, /*skip_special_tokens=*/true),
                                 example.ground_truth, {{"id", example.id}}});
    lengths.push_back(r.numel());
    rows_by_verifier[&verifier_for(setup, example)].push_back(i);
  }
  std::vector<double> row_scores(claim.rows.size(), 0.0);
  for (const auto& [verifier, rows] : rows_by_verifier) {
    std::vector<RewardInput> batch;
    batch.reserve(rows.size());
    for (size_t i : rows) batch.push_back(std::move(inputs[i]));
    const std::vector<double> batch_scores = verifier->score_batch(batch);
    for (size_t k = 0; k < rows.size(); ++k) row_scores[rows[k]] = batch_scores[k];
  }
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const double score = row_scores[i];
    double shaped = score;
    if (algorithm.overlong_buffer > 0) {
      const OverlongBuffer buffer{config.rollout.max_tokens, algorithm.overlong_buffer,
                                  algorithm.overlong_penalty};
      shaped += overlong_penalty(torch::tensor({lengths[i]}, torch::kInt64), buffer).item<double>();
    }
    scores.values.push_back(torch::tensor({static_cast<float>(shaped)}));
    verifier_scores.values.push_back(torch::tensor({static_cast<float>(score)}));
  }
  // The batch reads both back: the shaped scores train, the verifier's are reported.
  dock.put_columns(claim.row_ids(), {scores, verifier_scores});
  dock.ack(claim);
}

void reference_stage(ReferencePolicy& reference, TransferDock& dock, const Claim& claim,
                     bool write) {
  // An expert-parallel model's forwards are collectives over its EP ranks: a rank
  // with no rows still joins them.
  const bool collective = reference.model()->ep.enabled();
  if (claim.rows.empty() && !collective) return;
  const TrainBatch batch = to_train_batch(
      claim, claim.rows.empty() ? std::vector<ColumnData>{} : dock.get(claim), {});
  const torch::Tensor logprobs = reference.compute_logprobs(batch);
  if (!write || claim.rows.empty()) return;
  dock.put_columns(claim.row_ids(), {{rl_columns::kRefLogprobs, split_per_row(logprobs, batch)}});
}

void old_logprob_stage(ActorTrainer& actor, TransferDock& dock, const Claim& claim,
                       bool reuse_rollout, bool write) {
  const bool collective = !reuse_rollout && actor.model()->ep.enabled();  // as above
  if (claim.rows.empty() && !collective) return;
  if (reuse_rollout && !write) return;  // nothing to compute
  const auto columns = claim.rows.empty() ? std::vector<ColumnData>{} : dock.get(claim);
  if (reuse_rollout) {
    dock.put_columns(claim.row_ids(), {{rl_columns::kOldLogprobs,
                                       find_column(columns, rl_columns::kRolloutLogprobs).values}});
  } else {
    const TrainBatch batch = to_train_batch(claim, columns, {});
    const torch::Tensor logprobs = actor.compute_logprobs(batch).logprobs;
    if (!write || claim.rows.empty()) return;
    dock.put_columns(claim.row_ids(), {{rl_columns::kOldLogprobs, split_per_row(logprobs, batch)}});
  }
}

void value_stage(CriticTrainer& critic, TransferDock& dock, const Claim& claim, bool write) {
  if (claim.rows.empty()) return;
  const TrainBatch batch = to_train_batch(claim, dock.get(claim), {});
  const torch::Tensor values = critic.compute_values(batch);
  if (!write) return;
  dock.put_columns(claim.row_ids(), {{rl_columns::kValues, split_per_row(values, batch)}});
}

AdvantageStats advantage_stage(const AlgorithmSection& algorithm, KlController& kl_ctrl,
                               TransferDock& dock, const ClaimOptions& options) {
  ClaimOptions groups = options;
  groups.whole_groups = true;  // group estimators need every member's score
  const Claim claim = dock.claim(rl_consumers::kAdvantage, groups);
  const auto columns = dock.get(claim);
  const ColumnData& responses = find_column(columns, rl_columns::kResponse);
  const std::vector<int64_t> lengths = response_lengths(responses);
  const PackedSeqs packed = PackedSeqs::from_lengths(lengths);
  std::vector<int64_t> group_ids;
  for (const auto& row : claim.rows) group_ids.push_back(row.info.group_id);
  torch::Tensor scores = packed_column(find_column(columns, rl_columns::kScores));

  AdvantageStats stats;
  stats.rows = static_cast<int64_t>(claim.rows.size());
  if (stats.rows == 0) {
    dock.ack(claim);
    return stats;
  }
  torch::Tensor kl;
  if (algorithm.kl_in_reward) {
    // verl's apply_kl_penalty: the old policy's KL from the reference, per token.
    kl = kl_penalty(packed_column(find_column(columns, rl_columns::kOldLogprobs)),
                    packed_column(find_column(columns, rl_columns::kRefLogprobs)),
                    algorithm.kl_estimator);
    stats.kl_in_reward = kl.mean().item<double>();
    stats.kl_coef = kl_ctrl.value();
  }
  const torch::Tensor token_rewards = outcome_token_rewards(scores, packed, kl, stats.kl_coef);
  // Outcome estimators see the KL-shaped score: the sum of the row's token rewards.
  if (algorithm.kl_in_reward) scores = segment_sum(token_rewards, packed);

  std::vector<ColumnData> out;
  if (algorithm.name == AlgorithmName::kPpo) {
    const torch::Tensor values = packed_column(find_column(columns, rl_columns::kValues));
    const AdvantagesAndReturns gae =
        gae_advantages(token_rewards, values, packed, algorithm.gamma, algorithm.lambda);
    out.push_back({rl_columns::kAdvantages, split_per_row(gae.advantages, lengths)});
    out.push_back({rl_columns::kReturns, split_per_row(gae.returns, lengths)});
  } else {
    const torch::Tensor advantages =
        outcome_advantages(algorithm.name, algorithm.gamma, scores,
                           torch::tensor(group_ids, torch::kInt64), packed, token_rewards);
    out.push_back({rl_columns::kAdvantages, split_per_row(advantages, lengths)});
  }
  dock.put_columns(claim.row_ids(), out);
  dock.ack(claim);
  if (algorithm.kl_in_reward) kl_ctrl.update(stats.kl_in_reward, stats.rows);
  return stats;
}

namespace {

// The actor's batch of the claimed rows (none: a collective update's empty share): the
// old log-probs, advantages and, with a reference, its log-probs; always the behaviour
// policy's log-probs (the off-policy correction reads them when set, the mismatch
// metrics every time) and, with routing replay, its routed experts.
TrainBatch actor_batch(const RlWorkers& workers, const Claim& claim,
                       const std::vector<ColumnData>& columns) {
  std::vector<std::string> token_columns = {rl_columns::kOldLogprobs, rl_columns::kAdvantages};
  if (workers.reference) token_columns.push_back(rl_columns::kRefLogprobs);
  TrainBatch batch = to_train_batch(claim, columns, token_columns);
  if (claim.rows.empty()) {
    batch.token_columns[columns::kBehaviourLogprobs] = torch::zeros({0});
    return batch;
  }
  batch.token_columns[columns::kBehaviourLogprobs] =
      packed_column(find_column(columns, rl_columns::kRolloutLogprobs));
  if (workers.schema.with_routing) {
    batch.token_columns[columns::kBehaviourRoutedExperts] =
        routed_experts_column(batch, find_column(columns, rl_columns::kRolloutRoutedExperts));
  }
  return batch;
}

ActorUpdateOptions actor_update_options(const TrainConfig& config, uint64_t seed) {
  const AlgorithmSection& algorithm = config.algorithm;
  ActorUpdateOptions options;
  options.mini_batch_size = config.train.mini_batch_size;
  options.epochs = config.train.epochs;
  options.seed = seed;
  options.policy.clip_ratio_low = algorithm.clip_ratio_low;
  options.policy.clip_ratio_high = algorithm.clip_ratio_high;
  if (algorithm.clip_ratio_c > 0) options.policy.clip_ratio_c = algorithm.clip_ratio_c;
  options.policy.agg.mode = algorithm.loss_agg;
  if (algorithm.off_policy == OffPolicy::kDecoupled) {
    options.policy.correction = OffPolicyCorrection::kDecoupled;
    if (algorithm.off_policy_cap > 0) options.policy.correction_cap = algorithm.off_policy_cap;
  } else if (algorithm.off_policy == OffPolicy::kTis) {
    options.policy.correction = OffPolicyCorrection::kTruncatedIS;
    options.policy.correction_cap = algorithm.off_policy_cap;
  }
  options.kl_coef = algorithm.kl_coef;
  options.kl_estimator = algorithm.kl_estimator;
  options.entropy_coef = algorithm.entropy_coef;
  options.router_aux_loss_coef = algorithm.router_aux_loss_coef;
  return options;
}

}  // namespace

UpdateStats update_stage(const TrainConfig& config, RlWorkers& workers, TransferDock& dock,
                         const ClaimOptions& options, uint64_t seed, bool proximal_is_current) {
  const Claim actor_claim = dock.claim(rl_consumers::kActorUpdate, options);
  Claim critic_claim;
  if (workers.critic) {
    // Every row the actor claimed has returns by now (the advantage stage wrote them).
    ClaimOptions critic_options = options;
    critic_options.max_rows = static_cast<int64_t>(actor_claim.rows.size());
    critic_options.min_rows = critic_options.max_rows;
    critic_claim = dock.claim(rl_consumers::kCriticUpdate, critic_options);
  }
  UpdateStats stats =
      update_stage(config, workers, dock, actor_claim, critic_claim, seed, proximal_is_current);
  dock.ack(actor_claim);
  if (workers.critic) dock.ack(critic_claim);
  return stats;
}

UpdateStats update_stage(const TrainConfig& config, RlWorkers& workers, TransferDock& dock,
                         const Claim& claim, const Claim& critic_claim, uint64_t seed,
                         bool proximal_is_current) {
  UpdateStats stats;
  // A data-parallel trainer's update is collective: it runs with no local rows too.
  const bool collective = workers.actor->data_parallel().enabled();
  const std::vector<ColumnData> columns =
      claim.rows.empty() ? std::vector<ColumnData>{} : dock.get(claim);
  for (const auto& row : claim.rows) stats.row_versions.push_back(row.info.version);
  stats.rows = static_cast<int64_t>(claim.rows.size());
  if (stats.rows > 0 || collective) {
    const TrainBatch batch = actor_batch(workers, claim, columns);
    ActorUpdateOptions update = actor_update_options(config, seed);
    update.proximal_is_current = proximal_is_current;
    stats.actor = workers.actor->update(batch, update);
    stats.response_tokens = batch.num_response_tokens();
  }

  if (workers.critic) {
    const std::vector<ColumnData> critic_columns =
        critic_claim.rows.empty() ? std::vector<ColumnData>{} : dock.get(critic_claim);
    if (!critic_claim.rows.empty() || collective) {
      const TrainBatch batch =
          to_train_batch(critic_claim, critic_columns, {rl_columns::kValues, rl_columns::kReturns});
      CriticUpdateOptions update;
      update.mini_batch_size = config.train.mini_batch_size;
      update.epochs = config.train.epochs;
      update.seed = seed;
      update.clip_range = config.algorithm.value_clip;
      update.agg.mode = config.algorithm.loss_agg;
      stats.critic = workers.critic->update(batch, update);
    }
  }
  return stats;
}

UpdateStats accumulate_update_stage(const TrainConfig& config, RlWorkers& workers,
                                    TransferDock& dock, const ClaimOptions& options, uint64_t seed,
                                    bool proximal_is_current) {
  check_input(!workers.critic, "a streamed update has no critic step", "accumulate_update_stage");
  UpdateStats stats;
  const Claim claim = dock.claim(rl_consumers::kActorUpdate, options);
  for (const auto& row : claim.rows) stats.row_versions.push_back(row.info.version);
  stats.rows = static_cast<int64_t>(claim.rows.size());
  if (stats.rows > 0) {
    const TrainBatch batch = actor_batch(workers, claim, dock.get(claim));
    ActorUpdateOptions update = actor_update_options(config, seed);
    update.mini_batch_size = 0;  // one step over everything accumulated
    update.proximal_is_current = proximal_is_current;
    workers.actor->accumulate(batch, update);
    stats.response_tokens = batch.num_response_tokens();
  }
  dock.ack(claim);
  return stats;
}

ActorMetrics finish_update_stage(const TrainConfig& config, RlWorkers& workers, uint64_t seed) {
  return workers.actor->step_accumulated(actor_update_options(config, seed));
}

}  // namespace aspen
