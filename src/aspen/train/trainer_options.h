// Options every trainer in this folder shares (actor, critic, SFT): optimizer and
// schedule, compute precision, activation recompute and the micro-batch token budget.
// Thread safety: a plain value.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "aspen/train/imports.h"
#include "aspen/train/optimizer.h"

namespace aspen::train {

struct TrainerOptions {
  OptimizerOptions optimizer;
  // kFloat: train the given model in place. kBFloat16: forward/backward on a bf16 copy,
  // optimizer on the given (fp32) model as master weights (precision.h).
  torch::ScalarType compute_dtype = torch::kFloat;
  bool recompute = false;                    // per-layer activation recompute (recompute.h)
  int64_t max_tokens_per_micro_batch = 8192;  // packed tokens per forward/backward

  void validate() const;  // aspen::Error naming the option
};

}  // namespace aspen::train
