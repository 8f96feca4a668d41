// Advantage estimators (verl core_algos semantics) on the packed layout.
// Shapes: B rows, T packed response tokens, G groups; see packed.h.
// Every function returns per-token advantages [T] (and returns where the
// estimator has them), detached (no autograd history), on the inputs' device.
//
// Outcome estimators take one scalar score per row, s [B], and the group id of
// each row [B] int64 (rows of the same prompt share an id):
//   GRPO      a_b = (s_b - mean_g) / (std_g + eps)      std unbiased (torch.std)
//             Dr. GRPO (norm_by_std = false): a_b = s_b - mean_g
//             A singleton group uses mean 0, std 1 (as verl): a_b = s_b / (1 + eps).
//   RLOO      a_b = s_b - (sum_{j in g, j != b} s_j) / (n_g - 1)
//                 = n_g/(n_g-1) * (s_b - mean_g);  a singleton keeps a_b = s_b.
//   REINFORCE++-baseline
//             a_b = s_b - mean_g (singleton: mean 0), broadcast to tokens, then
//             whitened over ALL T tokens of the batch.
// The row value is broadcast to every token of the row.
//
// Token-level estimators take per-token rewards r [T] (see outcome_token_rewards):
//   REINFORCE++  returns G_t = r_t + gamma * G_{t+1} within each sequence (G_{L} = 0);
//                advantages = whiten(G) over ALL T tokens; returns = G (unwhitened).
//   GAE          delta_t = r_t + gamma * V_{t+1} - V_t   (V_{L} = 0 past the last token)
//                A_t = delta_t + gamma * lambda * A_{t+1};  returns = A + V (before
//                whitening); advantages = whiten(A) when whiten_advantages (verl does).
//
// whiten(x) = (x - mean(x)) / sqrt(var(x) + 1e-8), var unbiased (T/(T-1)), as
// verl's masked_whiten; var is taken as 0 when T < 2. Whitening is global over
// the tokens passed in: call it on the whole global batch, not per micro-batch.
//
// Loss mask (packed.h; multi-turn trajectories): every estimator works on the
// compacted rows of model tokens. Outcome advantages are 0 at environment tokens;
// whitening statistics (mean, var, the count) are over model tokens only; the score
// sits on each row's last MODEL token; the KL in the reward is 0 at environment
// tokens; REINFORCE++ returns and GAE run over each row's model tokens only (GAE of a
// trajectory = GAE of its compacted sequence, see gae_advantages), 0 elsewhere.
// Without a mask every function is exactly the unmasked computation above.
// Errors: aspen::Error for mis-shaped inputs. Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include "aspen/algo/imports.h"
#include "aspen/algo/packed.h"

namespace aspen::algo {

struct GrpoOptions {
  bool norm_by_std = true;  // false = Dr. GRPO
  double eps = 1e-6;
};

struct AdvantagesAndReturns {
  torch::Tensor advantages;  // [T]
  torch::Tensor returns;     // [T]
};

torch::Tensor grpo_advantages(const torch::Tensor& scores, const torch::Tensor& group_ids,
                              const PackedSeqs& packed, const GrpoOptions& options = {});

torch::Tensor rloo_advantages(const torch::Tensor& scores, const torch::Tensor& group_ids,
                              const PackedSeqs& packed);

torch::Tensor reinforce_pp_baseline_advantages(const torch::Tensor& scores,
                                               const torch::Tensor& group_ids,
                                               const PackedSeqs& packed);

// Per-token rewards for the token-level estimators: the outcome score on each
// sequence's last token, minus kl_coef * kl_t on every token (the KL-in-reward
// penalty; kl [T] from kl_penalty(), may be undefined when kl_coef = 0):
//   r_t = [t = last of b] * s_b - kl_coef * kl_t
// Throws aspen::Error for an empty sequence (its score has no token).
torch::Tensor outcome_token_rewards(const torch::Tensor& scores, const PackedSeqs& packed,
                                    const torch::Tensor& kl = {}, double kl_coef = 0.0);

AdvantagesAndReturns reinforce_pp_advantages(const torch::Tensor& token_rewards,
                                             const PackedSeqs& packed, double gamma);

AdvantagesAndReturns gae_advantages(const torch::Tensor& token_rewards, const torch::Tensor& values,
                                    const PackedSeqs& packed, double gamma, double lambda,
                                    bool whiten_advantages = true);

torch::Tensor whiten(const torch::Tensor& x);
// whiten over packed's model tokens (0 at environment tokens); whiten(x) without a mask.
torch::Tensor whiten(const torch::Tensor& x, const PackedSeqs& packed);

}  // namespace aspen::algo
