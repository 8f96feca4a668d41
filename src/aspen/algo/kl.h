// KL estimators between the policy and a reference policy, per token, from the
// log-probs of the sampled tokens (Schulman, "Approximating KL divergence";
// names as verl's kl_penalty). With d_t = logp_t - ref_t:
//   k1  ("kl", "k1")             d_t
//   abs ("abs")                  |d_t|
//   k2  ("mse", "k2")            0.5 * d_t^2
//   k3  ("low_var_kl", "k3")     exp(-d_t) + d_t - 1, with -d_t clamped to [-20, 20]
//                                 before exp and the result clamped to [-10, 10] (verl)
// k1 and k3 are unbiased for KL(pi || ref) under samples from pi; k3 is >= 0 and
// has lower variance.
//
// The same function serves both uses:
//   - KL in the reward (PPO-style penalty): pass detached tensors or run under
//     torch::NoGradGuard, then outcome_token_rewards(..., kl, coef).
//   - KL in the loss (GRPO-style): keep logp's graph; kl_loss() aggregates it.
// kl_loss and entropy_loss respect a loss mask (packed.h): model tokens only.
// Shapes: logp, ref [T] (packed, see packed.h). Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include <string>

#include "aspen/algo/aggregate.h"
#include "aspen/algo/imports.h"
#include "aspen/algo/packed.h"

namespace aspen::algo {

enum class KlEstimator { kK1, kAbs, kK2, kK3 };

// [T] per-token estimate; differentiable w.r.t. logprobs (and ref_logprobs).
torch::Tensor kl_penalty(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs,
                         KlEstimator estimator);

// aggregate(kl_penalty(logp, ref), agg): the KL term of the actor loss (added with +coef).
torch::Tensor kl_loss(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs,
                      const PackedSeqs& packed, KlEstimator estimator, const AggOptions& agg);

// aggregate(entropy, agg): the entropy bonus, SUBTRACTED from the loss with its coefficient
// (loss = pg_loss - entropy_coef * entropy_loss). entropy [T], differentiable.
torch::Tensor entropy_loss(const torch::Tensor& entropy, const PackedSeqs& packed,
                           const AggOptions& agg);

}  // namespace aspen::algo
