// The loop every trainer's update shares (actor and critic): epochs -> mini-batches
// (one optimizer step each, counted on the GLOBAL rows: trainer_data_parallel.h) ->
// this rank's token-budgeted micro-batches -> the global denominators every rank
// divides its losses by, so gradient accumulation over micro-batches and ranks is exact.
//
// for_each_update_step calls `step` once per mini-batch whose global token count is
// non-zero; a mini-batch with no response token on any rank is skipped by every rank
// alike (the counts come from one collective). The caller computes the losses, runs the
// backwards (arming the reducer before the one at `last_backward`), reduces the
// gradients and takes the optimizer step.
// Collectives: global_counts() per mini-batch (data-parallel trainers only).
// Thread safety: the trainer's thread, as the trainer itself.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/optimizer.h"
#include "aspen/train/precision.h"
#include "aspen/train/train_batch.h"
#include "aspen/train/trainer_data_parallel.h"

namespace aspen::train {

struct UpdateStep {
  int64_t epoch = 0;
  std::vector<MicroBatch> micro_batches;  // this rank's (possibly none)
  size_t last_backward = 0;  // the last micro-batch with a loss; micro_batches.size(): none
  // Response tokens of the mini-batch over every rank (> 0), the policy's only with a
  // loss mask (MicroBatch::num_loss_tokens): a mini-batch of environment tokens only
  // is skipped like an empty one.
  int64_t global_tokens = 0;
  int64_t global_rows = 0;    // its rows over every rank
};

struct UpdateLoopOptions {
  int64_t epochs = 1;
  int64_t mini_batch_size = 0;  // rows per optimizer step (global); <= 0: all rows
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t max_tokens_per_micro_batch = 0;
  // The global row count when the caller has it already (-1: counted here, one
  // collective on a data-parallel trainer).
  int64_t global_rows = -1;
};

void for_each_update_step(TrainerDataParallel& data_parallel, const TrainBatch& batch,
                          const UpdateLoopOptions& options, torch::Device device,
                          const std::function<void(const UpdateStep&)>& step);

// The end of one update step, after its last backward: the gradients summed over the
// ranks, the optimizer step, and its count in `metrics` (ActorMetrics, CriticMetrics):
// `skipped_steps`, or `steps` with `grad_norm` summed and `lr` the last.
template <typename Metrics>
void step_and_count(TrainerDataParallel& data_parallel, MasterWeights& master,
                    Optimizer& optimizer, Metrics& metrics) {
  data_parallel.reduce_grads();
  const StepResult step = master.step(optimizer);
  if (step.skipped) {
    ++metrics.skipped_steps;
    return;
  }
  ++metrics.steps;
  metrics.grad_norm += step.grad_norm;
  metrics.lr = step.lr;
}

}  // namespace aspen::train
