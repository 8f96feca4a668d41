// Runs one pipeline stage's part of a training step: the forwards and backwards of
// packed micro-batches in 1F1B order (train/pipeline_schedule.h), with activations
// sent to the next stage and their gradients back to the previous one
// (parallel/pipeline_p2p.h).
//
// Every stage of the pipeline group calls run_one_f_one_b with the same micro-batches
// (the balanced micro-batcher's, train/micro_batches.h: each stage needs the packing,
// cu_seqlens, for attention masking; only the first reads the token ids). The first
// stage embeds the ids; every stage runs its layers (QwenForCausalLM::forward_stage);
// the last stage gives its hidden states [T, C] to `loss` and backs up the scalar it
// returns. Each micro-batch's backward adds to the parameters' .grad, exactly as the
// one-process trainer accumulates micro-batches: `loss` should return the micro-batch's
// loss already scaled by its share of the step. The received activation's shape is
// checked against the micro-batch's token count.
//
// After the last run of a step (before clipping and the optimizer), a tied model's
// stages call sum_tied_embedding_gradient, which makes the first stage's embedding
// gradient and the last stage's head gradient their sum: the gradient of the one
// parameter they both are.
//
// With one stage (model->pp disabled) run_one_f_one_b is the plain loop: forward,
// loss, backward per micro-batch.
//
// PP x TP: the pipeline group links the same TP rank of every stage, and each TP rank
// sends its own copy of the activations (they are replicated over TP: the layers end in
// an all-reduce) and of their gradients (also replicated: the layers' input copy
// all-reduces them in backward) to its peer. Chosen over "TP rank 0 sends, the next
// stage broadcasts over TP": no collective is added on the critical path and the t
// links carry their messages in parallel, at t times the bytes in total - per micro-batch
// of T tokens and per direction, t * (T * C * element size + 64 header bytes) (fp32,
// C = 4096, T = 4096: 64 MiB per link). Megatron's scatter/gather (each TP rank sends
// 1/t, the receivers all-gather) would cut that to the one copy; not done.
// Not done: interleaved virtual stages, PP with EP (the model refuses it).
// Errors: aspen::Error for an empty micro-batch list, a message whose shape does not
// match the micro-batch, or a failed send/receive.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"

namespace aspen::train {

// One stage as the runner sees it: its place in the pipeline and its layers' forward
// (input ids [T] on the first stage, the previous stage's hidden [T, C] elsewhere ->
// hidden [T, C], after the final norm on the last stage), so that any model built on
// stages - the policy, the critic's decoder - runs the same schedule.
// `log` (may be null): where the stage's sparse layers record their routing.
// num_experts > 0: a MoE policy whose load-balancing loss crosses the stages
// (train/pipeline_routing.h): the stages exchange routing messages with the
// activations and feedback with their gradients.
struct StageForward {
  PipelineStages pp;
  std::function<torch::Tensor(const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                              MoeRoutingLog* log)>
      forward;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool routes() const { return num_experts > 0; }
};
StageForward stage_forward(QwenForCausalLM model);
// The critic's decoder: no load-balancing loss, no routing messages.
StageForward stage_forward(QwenModel decoder);

// The last stage's loss of micro-batch `index` from its hidden states [T, C], as a
// scalar to backward. With routing (a MoE stage) the other stages back up their part
// of the load-balancing loss with the feedback the last stage sends; run_one_f_one_b's
// own last stage does not compute one (aspen::Error: a trainer's last stage uses
// PipelinePass, train/pipeline_pass.h).
using HiddenLoss = std::function<torch::Tensor(size_t index, const torch::Tensor& hidden)>;
void run_one_f_one_b(const StageForward& stage, const std::vector<MicroBatch>& micro_batches,
                     const HiddenLoss& loss);

// The policy's: the hidden states are scored with model->head_logprobs.
using StageLoss = std::function<torch::Tensor(QwenForCausalLM& model, size_t index,
                                              const torch::Tensor& hidden)>;
void run_one_f_one_b(QwenForCausalLM& model, const std::vector<MicroBatch>& micro_batches,
                     const StageLoss& loss);

// Tied embeddings under PP: sums the embedding's gradient over the first and last
// stage (both must call it, with a defined gradient); a no-op for an untied model,
// without PP, and on a middle stage.
void sum_tied_embedding_gradient(QwenForCausalLM& model);

}  // namespace aspen::train
