// The actor's update on a pipeline-parallel model (model->pp enabled): what
// ActorTrainer (train/actor.h) runs instead of its plain micro-batch loop when its
// model is one stage of a pipeline.
//
// The 1F1B schedule (train/pipeline_schedule.h) makes the LAST stage's order F0 B0 F1
// B1 ...: each micro-batch's forward and backward back to back, exactly the order of
// the actor's own loop. So the last stage keeps that loop - the policy loss with its
// aggregation, KL, entropy and every metric computed as on one process - and only
// swaps its two model steps for this pass's: response_logprobs (receive the previous
// stage's activations, run the stage's layers, score with the head) and backward (the
// loss's backward, then the activations' gradient sent back). The other stages run
// their whole part with run_one_f_one_b (train/pipeline_runner.h): they never see a
// loss. All stages use the same micro-batches, those of the step with response tokens
// (the actor skips the others), so the messages pair up.
//
// After a step's micro-batches (finish), a tied model's first and last stages sum the
// embedding's gradient (pipeline_runner.h). Clipping uses the norm of the whole model
// (train/whole_model_norm.h: squared norms summed over the TP group, then the pipeline
// group, the tied embedding's two copies counted once), so the step equals one
// process's. Metrics are the last stage's, broadcast to every stage
// (share_last_stage_metrics).
//
// PP x TP: each stage is a TP model (model/qwen_model.h); the pipeline group links
// the same TP rank of every stage, so each TP rank exchanges its own (identical) copy
// of the activations and their gradients with its peer (pipeline_runner.h says why).
//
// DP x PP (ActorOptions::data_parallel's group: the ranks of the SAME stage in the d
// pipelines): every pipeline trains its own rows, and each stage's gradients are summed
// over its DP group after the step's backwards and the tied-embedding sum - not
// overlapped with the last backward (an armed reducer would read the tied embedding's
// gradient before its sum) - so the stages of all pipelines step like one process on the
// union of the rows; the clip norm needs no DP reduction (DP ranks hold equal grads).
//
// A MoE model (Qwen3-MoE without EP): the load-balancing loss crosses the stages as
// train/pipeline_routing.h says - the last stage sees every layer's routing (the aux
// value, the router load and top-k mismatch metrics as one process), each other stage
// backs up its own layers' term with the feedback - so the routers' gradients equal one
// process's.
//
// PP x EP (a stage's EP group: its ranks in the pipelines, data-parallel ranks with
// their own experts): the EP ranks of a stage must run the same passes, so the step's
// pass count is agreed over the EP group (lockstep_count, expert_lockstep.h) and the
// ranks with fewer run padding passes through their stages after the real ones (the
// forward-only pass likewise); the clip norm sums over the EP group, then the pipeline.
//
// Not done (refused, naming the keys): streaming accumulation (the async pipeline) and
// routing replay. Activation recompute
// is not applied on stages (the same numbers, more activation memory).
// Thread safety: the trainer's one thread. Errors: aspen::Error for a message that does
// not match its micro-batch or a call out of order.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/actor.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/optimizer.h"
#include "aspen/train/pipeline_pass.h"

namespace aspen::train {

class PipelineActorPass {
 public:
  // `micro_batches`: the step's, as the actor plans them (all stages the same).
  PipelineActorPass(QwenForCausalLM model, const std::vector<MicroBatch>& micro_batches);

  bool last_stage() const { return pass_.last_stage(); }

  // Stages but the last: their forwards and backwards of the whole step.
  void run_stage() { pass_.run_stage(); }

  // The last stage, for each micro-batch with response tokens in order: the response
  // tokens' log-probs (with the autograd graph back to the received activations), then
  // backward(loss) with that micro-batch's scalar loss.
  // A MoE model needs `routing`: it gets every stage's sparse layers' routing of the
  // forward (train/pipeline_routing.h), and `aux_scale` is the factor its
  // load-balancing loss had in `loss`.
  TokenLogprobs response_logprobs(const MicroBatch& micro_batch, const LogprobHeadOptions& head,
                                  MoeRoutingLog* routing = nullptr);
  void backward(const torch::Tensor& loss, double aux_scale = 0.0) {
    pass_.backward(loss, aux_scale);
  }

  // Every stage, after the step's micro-batches and the master gradients' accumulation:
  // waits for the sends and sums the tied embedding's gradient on `master` (the model
  // the optimizer steps). aspen::Error when the last stage left micro-batches unrun.
  void finish(QwenForCausalLM& master);

 private:
  QwenForCausalLM model_;
  PipelinePass pass_;  // train/pipeline_pass.h
};

// Every stage gets the last stage's metrics (the losses exist only there).
void share_last_stage_metrics(const QwenForCausalLM& model, ActorMetrics& metrics);


}  // namespace aspen::train
