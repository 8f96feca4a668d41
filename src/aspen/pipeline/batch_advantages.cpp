#include "aspen/pipeline/batch_advantages.h"

#include <numeric>

#include "aspen/algo/algo.h"
#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

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

void check_token_input(const torch::Tensor& column, int64_t tokens, const char* name) {
  check_input(column.defined() && column.dim() == 1 && column.size(0) == tokens,
              "needs one value per response token (" + std::to_string(tokens) + ")",
              std::string("advantage input ") + name);
}

}  // namespace

BatchAdvantages batch_advantages(const AlgorithmSection& algorithm, KlController& kl_ctrl,
                                 const AdvantageInputs& inputs) {
  const size_t rows = inputs.lengths.size();
  check_input(inputs.group_ids.size() == rows && inputs.scores.size() == rows,
              "lengths, group ids and scores must have one entry per row",
              "advantage inputs");
  BatchAdvantages out;
  out.stats.rows = static_cast<int64_t>(rows);
  const int64_t tokens = std::accumulate(inputs.lengths.begin(), inputs.lengths.end(), int64_t{0});
  if (rows == 0) {
    out.advantages = torch::zeros({0});
    if (algorithm.name == AlgorithmName::kPpo) out.returns = torch::zeros({0});
    return out;
  }
  if (inputs.loss_mask.defined()) check_token_input(inputs.loss_mask, tokens, "loss_mask");
  const PackedSeqs packed =
      PackedSeqs::from_lengths(inputs.lengths).with_loss_mask(inputs.loss_mask);
  torch::Tensor scores = torch::tensor(inputs.scores, torch::kFloat64).to(torch::kFloat32);
  torch::Tensor kl;
  if (algorithm.kl_in_reward) {
    check_token_input(inputs.old_logprobs, tokens, "old_logprobs");
    check_token_input(inputs.ref_logprobs, tokens, "ref_logprobs");
    // verl's apply_kl_penalty: the old policy's KL from the reference, per token.
    kl = kl_penalty(inputs.old_logprobs.to(torch::kFloat32),
                    inputs.ref_logprobs.to(torch::kFloat32), algorithm.kl_estimator);
    out.stats.kl_in_reward =
        (packed.has_loss_mask() ? token_mean_metric(kl, packed) : kl.mean()).item<double>();
    out.stats.kl_coef = kl_ctrl.value();
  }
  const torch::Tensor token_rewards = outcome_token_rewards(scores, packed, kl, out.stats.kl_coef);
  // Outcome estimators see the KL-shaped score: the sum of the row's token rewards.
  if (algorithm.kl_in_reward) scores = segment_sum(token_rewards, packed);
  if (algorithm.name == AlgorithmName::kPpo) {
    check_token_input(inputs.values, tokens, "values");
    const AdvantagesAndReturns gae =
        gae_advantages(token_rewards, inputs.values.to(torch::kFloat32), packed, algorithm.gamma,
                       algorithm.lambda);
    out.advantages = gae.advantages.to(torch::kFloat32);
    out.returns = gae.returns.to(torch::kFloat32);
  } else {
    out.advantages = outcome_advantages(algorithm.name, algorithm.gamma, scores,
                                        torch::tensor(inputs.group_ids, torch::kInt64), packed,
                                        token_rewards)
                         .to(torch::kFloat32);
  }
  if (algorithm.kl_in_reward) kl_ctrl.update(out.stats.kl_in_reward, out.stats.rows);
  return out;
}

}  // namespace aspen::pipeline
