// TrainingStateSwap: the "swap" half of allgather-swap as a schedule uses it. Before a
// colocated rollout the trainer's optimizer moments and gradients (actor and, for
// ppo, critic) leave memory (parallel/swap_space.h: a swap file on CPU, host memory
// on an accelerator); before the update they come back, bit for bit, into the same
// tensor objects, so training continues exactly as without the swap (tested).
// Disabled (placement.swap false) every call is a no-op.
// Thread safety: the schedule's thread only.
#pragma once

#include <memory>

#include "aspen/parallel/swap_space.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"

namespace aspen::pipeline {

class TrainingStateSwap {
 public:
  explicit TrainingStateSwap(bool enabled);

  // Returns the bytes that left memory (0 when disabled or nothing exists yet: AdamW
  // creates its moments at the first step).
  int64_t swap_out(RlWorkers& workers);
  void swap_in();
  bool enabled() const { return space_ != nullptr; }

 private:
  std::unique_ptr<SwapSpace> space_;
};

}  // namespace aspen::pipeline
