#include "aspen/pipeline/rl_stages.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/algo/algo.h"
#include "aspen/config/pipeline_parallel_checks.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {
namespace {

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
                     std::optional<ProcessGroupHandle> expert_data_parallel,
                     const PipelineStages& pipeline)
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
  // What the trainer runs on stages so far (run_rl checked it before any work too).
  if (pipeline.enabled()) check_trainer_pipeline(config, setup.model->config.num_hidden_layers);
  if (tensor_parallel.enabled() || expert_parallel.enabled() || pipeline.enabled()) {
    trained =
        QwenForCausalLM(setup.model->config, tensor_parallel, expert_parallel, pipeline);
    if (setup.model->has_lora()) trained->attach_lora(setup.model->lora_options);
    trained->to(setup.train_device);
    std::map<std::string, torch::Tensor> full;
    for (const auto& [name, tensor] : setup.model->hf_state()) full[name] = tensor.detach();
    trained->load_state(full, "policy, split for tensor, expert or pipeline parallelism");
  }
  if (pipeline.enabled()) {
    const LayerRange layers = pipeline.layers(setup.model->config.num_hidden_layers,
                                              "placement.train.pp");
    log_info("actor: pipeline stage ", pipeline.stage, " of ", pipeline.size, " trains layers [",
             layers.begin, ", ", layers.end, ")", pipeline.first() ? " and the embedding" : "",
             pipeline.last() ? " and the head" : "");
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
  schema.with_routing = setup.model->config.is_moe();
  schema.with_partial = config.pipeline.partial_rollout;
  schema.with_trajectory = config.rollout.multi_turn();
  if (config.algorithm.kl_coef != 0.0 || config.algorithm.kl_in_reward) {
    reference = std::make_unique<ReferencePolicy>(trained, ReferenceOptions{});
    // Under LoRA the reference is the policy's base: nothing of its own was saved.
    if (saved != nullptr && reference->holds_copy())
      reference->model()->load_state(saved->reference, "checkpoint reference");
  }
  if (config.algorithm.name == AlgorithmName::kPpo) {
    // On stages (PP): the critic's same stage of the policy's (train/critic.h).
    CriticModel critic_model = critic_from_policy(pipeline.enabled() ? trained : setup.model);
    if (saved != nullptr) {
      // A stage takes its part of the saved (whole) critic.
      std::map<std::string, torch::Tensor> held;
      for (const auto& item : critic_model->named_parameters(/*recurse=*/true)) {
        const auto it = saved->critic.find(item.key());
        if (it != saved->critic.end()) held.insert(*it);
      }
      load_named_parameters(*critic_model, pipeline.enabled() ? held : saved->critic,
                            "checkpoint critic");
    }
    DataParallelConfig critic_dp;
    critic_dp.group = data_parallel;
    critic = std::make_unique<CriticTrainer>(
        critic_model, trainer_options(train, train.critic_lr, train.iterations), critic_dp);
  }
}

std::map<std::string, torch::Tensor> policy_weights(const QwenForCausalLM& model) {
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : model->has_lora() ? model->lora_state() : model->hf_state()) {
    weights[name] = tensor.detach().clone();
  }
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
  trajectory_stats.insert(trajectory_stats.end(), other.trajectory_stats.begin(),
                          other.trajectory_stats.end());
}

void reward_stage(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                  const Claim& claim) {
  const AlgorithmSection& algorithm = config.algorithm;
  if (claim.empty()) return;
  const auto columns = dock.get(claim);
  const ColumnData& responses = find_column(columns, rl_columns::kResponse);
  const ColumnData& examples = find_column(columns, rl_columns::kExample);
  // Trajectories: the environment's reward when it gave one; otherwise the verifier
  // scores the last model turn (the final answer), and DAPO's overlong rule measures
  // that turn against rollout.max_tokens, the per-turn cap.
  const bool trajectories = rl_schema_options(dock.schema()).with_trajectory;
  const ColumnData* turn_starts =
      trajectories ? &find_column(columns, rl_columns::kTurnStarts) : nullptr;
  const ColumnData* trajectory_rewards =
      trajectories ? &find_column(columns, rl_columns::kTrajectoryReward) : nullptr;
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
    std::vector<TokenId> response(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
    if (turn_starts != nullptr && turn_starts->values[i].numel() > 0) {
      const int64_t last = turn_starts->values[i].to(torch::kInt64).flatten()[-1].item<int64_t>();
      response.erase(response.begin(), response.begin() + last);
    }
    const int64_t example_index = examples.values[i].item<int64_t>();
    check_input(
        example_index >= 0 && example_index < static_cast<int64_t>(setup.train_examples.size()),
        "example " + std::to_string(example_index) + " out of range",
        "group " + std::to_string(info.group_id));
    const TaskExample& example = setup.train_examples[static_cast<size_t>(example_index)];
    inputs.push_back(RewardInput{example.prompt_text,
                                 setup.tokenizer->decode(response, /*skip_special_tokens=*/true),
                                 example.ground_truth, {{"id", example.id}}});
    lengths.push_back(static_cast<int64_t>(response.size()));
    const bool scored_by_environment =
        trajectory_rewards != nullptr &&
        std::isfinite(trajectory_rewards->values[i].item<float>());
    if (!scored_by_environment) rows_by_verifier[&verifier_for(setup, example)].push_back(i);
  }
  std::vector<double> row_scores(claim.rows.size(), 0.0);
  if (trajectory_rewards != nullptr) {
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      const float reward = trajectory_rewards->values[i].item<float>();
      if (std::isfinite(reward)) row_scores[i] = reward;
    }
  }
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

}  // namespace aspen::pipeline
