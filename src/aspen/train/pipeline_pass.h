// A trainer's step on one pipeline stage, for trainers that keep their own micro-batch
// loop on the last stage (the actor, the critic), and the forward-only pass their
// log-prob / value computations take.
//
// PipelinePass (training). 1F1B (train/pipeline_schedule.h) makes the LAST stage's
// order F0 B0 F1 B1 ...: each micro-batch's forward and backward back to back, the order
// of a plain trainer's loop. So the last stage keeps its loop (its losses and metrics as
// on one process) and swaps only its model steps for forward (receive the previous
// stage's activations, run the stage's layers: hidden states [T, C] with the autograd
// graph back to the received activations) and backward (the loss's backward, then the
// activations' gradient sent back). The other stages run their whole part with
// run_stage (run_one_f_one_b, train/pipeline_runner.h): they never see a loss. All
// stages use the same micro-batches, those of the step with response tokens (trainers
// skip the others), so the messages pair up. finish() waits for the sends.
//
// pipeline_forward_only (log-probs, values): the micro-batches with response tokens go
// through the stages in order (no backward, so no 1F1B interleaving); on the last stage
// `score` gets each one's hidden states. Every stage of the pipeline group calls it with
// the same micro-batches; results exist on the last stage only (callers broadcast them).
// No routing is exchanged (no loss, so no load-balancing term).
//
// Thread safety: the trainer's one thread. Errors: aspen::Error for a message that does
// not match its micro-batch or a call out of order.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/pipeline_runner.h"

namespace aspen::train {

class PipelinePass {
 public:
  // `micro_batches`: the step's, as the trainer plans them (all stages the same).
  PipelinePass(StageForward stage, const std::vector<MicroBatch>& micro_batches);

  bool last_stage() const { return stage_.pp.last(); }
  // No micro-batch of the step has response tokens: nothing runs on any stage.
  bool empty() const { return trained_.empty(); }

  // Stages but the last: their forwards and backwards of the whole step.
  void run_stage();
  // The last stage, for each micro-batch with response tokens in order: its hidden
  // states, then backward(loss) with that micro-batch's scalar loss. A MoE stage
  // (stage.routes()) needs `log`: it receives the earlier stages' routing and this
  // stage's layers append theirs, so it holds the whole forward's
  // (train/pipeline_routing.h); `aux_scale` is the factor the load-balancing loss of
  // that log had in `loss` (0: none), sent back with the gradient.
  torch::Tensor forward(const MicroBatch& micro_batch, MoeRoutingLog* log = nullptr);
  void backward(const torch::Tensor& loss, double aux_scale = 0.0);
  // Every stage, after the step's micro-batches: waits for the sends. aspen::Error when
  // the last stage left micro-batches unrun.
  void finish();

 private:
  StageForward stage_;
  std::vector<MicroBatch> trained_;  // the micro-batches with response tokens
  std::optional<ProcessGroupHandle> group_;
  size_t next_ = 0;      // the last stage's next micro-batch
  torch::Tensor input_;  // its received activations, while its backward is pending
  MoeRoutingLog routing_;  // the whole forward's routing, while its backward is pending
  std::vector<PendingWork> sends_;
};

void pipeline_forward_only(
    const StageForward& stage, const std::vector<MicroBatch>& micro_batches, torch::Device device,
    const std::function<void(const MicroBatch& micro_batch, const torch::Tensor& hidden)>& score);

}  // namespace aspen::train
