// Rollout correction (verl's `algorithm.rollout_correction`): importance-sampling
// weights and rejection masks for rows sampled by a policy (the rollout's, "behaviour")
// other than the one the PPO ratio is anchored at (the proximal / trainer-old policy).
// They correct both causes of the gap: stale weights (async pipeline) and numerics
// (the rollout's kernels, batching and dtype against the trainer's).
//
// Per token t of sequence b (L_b tokens), with old_t the proximal log-prob and beh_t
// the rollout's (both detached):
//   d_t   = clamp(old_t - beh_t, -20, 20)        rho_t = exp(d_t)    (token ratio)
//   rho_b = exp(clamp(sum_{t in b} d_t, -20, 20))                     (sequence ratio:
//           the product of the token ratios)
//   g_b   = exp(clamp(sum_{t in b} d_t / L_b, -20, 20))               (geometric mean)
// IS weights (rollout_is, truncated importance sampling, TIS):
//   kToken:    w_t = min(rho_t, C)        kSequence: w_t = min(rho_b, C) for t in b
//   (C = is_threshold; kNone: w_t = 1). The weight multiplies the token's PPO loss.
// Rejection (rollout_rs, masked importance sampling, MIS): a token is kept iff its
// ratio lies in [lower, upper]: kToken uses rho_t, kSequence rho_b, kGeometric g_b
// (the last two keep or reject a whole sequence). A rejected token's loss is
// multiplied by exactly 0, so it contributes no gradient; it still counts in the
// aggregation's denominators (verl removes it from them: Aspen's denominators are
// fixed per mini-batch before any forward, across micro-batches and data-parallel
// ranks, so the loss of a batch with rejected tokens is scaled by the kept share).
// All weights and masks are constants (no gradient).
// Loss mask (packed.h): environment tokens have d_t = 0 (weight 1, never rejected
// alone), so rho_b and g_b run over the row's model tokens (L_b = its model tokens),
// and the metrics are over model tokens only.
//
// Shapes: [T] packed (packed.h). Thread safety: pure function.
#pragma once

#include <torch/types.h>

#include "aspen/algo/imports.h"
#include "aspen/algo/packed.h"

namespace aspen::algo {

enum class RolloutIsLevel { kNone, kToken, kSequence };                 // rollout_is
enum class RolloutRsLevel { kNone, kToken, kSequence, kGeometric };     // rollout_rs

struct RolloutCorrectionOptions {
  RolloutIsLevel is_level = RolloutIsLevel::kNone;
  double is_threshold = 2.0;  // C, > 0
  RolloutRsLevel rs_level = RolloutRsLevel::kNone;
  double rs_upper = 2.0;      // > 0
  double rs_lower = 0.5;      // in [0, rs_upper]
};

// Detached 0-dim means over this batch's tokens (what the metrics line reports).
struct RolloutCorrectionMetrics {
  torch::Tensor is_mean;         // mean w_t after truncation (1 without IS)
  torch::Tensor ratio_mean;      // mean rho_t before truncation (token ratio)
  torch::Tensor ratio_max;       // max and min of rho_t (1 for an empty batch)
  torch::Tensor ratio_min;
  torch::Tensor truncated_frac;  // share of tokens whose weight was truncated at C
  torch::Tensor masked_frac;     // share of tokens rejected (token or whole sequence)
  torch::Tensor kl_k3;           // k3 estimate of KL(rollout || proximal): rho - 1 - log rho
};

struct RolloutCorrection {
  torch::Tensor weights;  // [T]: w_t * keep_t (0 where rejected)
  torch::Tensor changed;  // [T] bool: truncated or rejected
  RolloutCorrectionMetrics metrics;
};

RolloutCorrection rollout_correction(const torch::Tensor& old_logprobs,
                                     const torch::Tensor& behaviour_logprobs,
                                     const PackedSeqs& packed,
                                     const RolloutCorrectionOptions& options);

}  // namespace aspen::algo
