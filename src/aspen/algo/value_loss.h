// The critic's clipped value loss (PPO; verl compute_value_loss). Per token, with
// v the new value prediction (with grad), v_old the rollout-time value and R the
// return (advantages.h: GAE returns):
//   v_clip = clamp(v, v_old - clip_range, v_old + clip_range)
//   l_t    = max( (v - R)^2, (v_clip - R)^2 )
//   loss   = 0.5 * aggregate(l, agg)
//   clip_frac = fraction of tokens where (v_clip - R)^2 > (v - R)^2
// Loss mask (packed.h): the critic trains on model-token positions only - the loss
// and clip_frac are over model tokens, an environment token adds no gradient.
// Shapes: all [T] packed; loss and clip_frac 0-dim (clip_frac detached).
// Errors: aspen::Error for mis-shaped inputs or clip_range < 0.
// Thread safety: pure function.
#pragma once

#include <torch/types.h>

#include "aspen/algo/aggregate.h"
#include "aspen/algo/imports.h"
#include "aspen/algo/packed.h"

namespace aspen::algo {

struct ValueLossResult {
  torch::Tensor loss;       // 0-dim, differentiable w.r.t. values
  torch::Tensor clip_frac;  // 0-dim, detached
};

ValueLossResult value_loss(const torch::Tensor& values, const torch::Tensor& old_values,
                           const torch::Tensor& returns, const PackedSeqs& packed,
                           double clip_range, const AggOptions& agg);

}  // namespace aspen::algo
