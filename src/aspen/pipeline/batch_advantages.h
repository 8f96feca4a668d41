// The advantages of one training batch, from what every trainer knows of it: per row
// its response length, group and shaped score; per token, where the estimator needs
// them, the old and reference log-probs (KL in the reward) and the critic's values
// (ppo). A pure function of its inputs, so every data-parallel trainer computes the
// same advantages from the same whole-batch inputs (trainer_stages.h gathers them),
// and batch-level statistics (REINFORCE++ and GAE whitening, the adaptive KL
// controller's step) see the whole batch as in verl, whose driver computes them.
//
//   grpo, dapo      (score - group mean) / group std, per token   (algo/advantages.h)
//   dr_grpo         score - group mean
//   rloo            leave-one-out baseline
//   reinforce_pp    discounted token rewards, whitened over the batch
//   ..._baseline    score - group mean, whitened over the batch
//   ppo             GAE on the token rewards and values, whitened; returns = targets
// With algorithm.kl_in_reward the old policy's KL from the reference (per token,
// verl's apply_kl_penalty) is subtracted from the token rewards at the controller's
// coefficient, the outcome estimators see the row's summed token rewards, and the
// controller steps on the batch's mean KL.
// Errors: aspen::Error when the inputs disagree in length (naming the input).
// Thread safety: pure, except for stepping `kl_ctrl`.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/algo/kl_controller.h"
#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"

namespace aspen::pipeline {

struct AdvantageInputs {
  std::vector<int64_t> lengths;    // response tokens per row; R = their sum
  std::vector<int64_t> group_ids;  // per row
  std::vector<double> scores;      // shaped verifier reward per row
  torch::Tensor old_logprobs;      // [R], with kl_in_reward; else undefined
  torch::Tensor ref_logprobs;      // [R], with kl_in_reward; else undefined
  torch::Tensor values;            // [R], ppo; else undefined
  // [R] 0/1, multi-turn trajectories: 1 for a model token, 0 for an environment token.
  // Every estimator then works on model tokens only (algo/advantages.h): advantages and
  // returns are 0 at environment tokens, the KL in the reward and its mean count model
  // tokens only. Undefined: every token is the model's.
  torch::Tensor loss_mask;
};

struct BatchAdvantages {
  torch::Tensor advantages;  // [R] float32
  torch::Tensor returns;     // [R] float32, ppo; else undefined
  AdvantageStats stats;
};

BatchAdvantages batch_advantages(const AlgorithmSection& algorithm, KlController& kl_ctrl,
                                 const AdvantageInputs& inputs);

}  // namespace aspen::pipeline
