// Log-probabilities (and entropy) of response tokens under a causal LM, for packed
// micro-batches: the one forward every policy-side trainer uses (actor update,
// old/ref log-probs, SFT).
//
// Only response positions go through the head: hidden [T, C] is gathered at
// MicroBatch::hidden_index and scored against target_ids with chunked_logprobs, so
// neither [T, V] nor the prompt positions' logits are ever computed.
//
// Shapes: R = response tokens of the micro-batch (resp. of the whole batch).
//   response_logprobs -> logprobs [R] fp32 (fp64 for an fp64 model), entropy [R] when asked.
//   batch_logprobs    -> [R_total] in the batch's token-column order.
// Thread safety: as the model's forward. Errors: aspen::Error for bad token ids.
#pragma once

#include <torch/torch.h>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"

namespace aspen::train {

// With the autograd graph when grad mode is on (recompute: see recompute.h). `routing`
// (optional): the MoE layers' routing of this forward (model/moe_routing.h).
TokenLogprobs response_logprobs(QwenForCausalLM& model, const MicroBatch& micro_batch,
                                const LogprobHeadOptions& head, bool recompute,
                                MoeRoutingLog* routing = nullptr);

// Every response token of `batch`, under torch::NoGradGuard, packed max_tokens at a time.
// With `routing_replay` each forward replays the batch's behaviour_routed_experts
// (routing_replay_log below).
TokenLogprobs batch_logprobs(QwenForCausalLM& model, const TrainBatch& batch,
                             int64_t max_tokens, const LogprobHeadOptions& head,
                             bool routing_replay = false);

// The outputs of a log-prob pass over `batch`: zeros for every response token (and for
// its entropy when `with_entropy`) on `param`'s device, in double when `param` is double
// and in float otherwise (the head computes in float for lower precisions).
TokenLogprobs zero_token_logprobs(const TrainBatch& batch, const torch::Tensor& param,
                                  bool with_entropy);

// Routing replay (R3) of `micro_batch`: a log whose `replay` [T, S, k] routes each
// response token's predicting position (hidden_index) to the experts the rollout chose
// there (its behaviour_routed_experts column, [R, S * k]); the other positions (the
// prompt, which the rollout's prefill does not record) keep the trainer's own top-k.
// aspen::Error naming algorithm.rollout_correction.routing_replay when the model is not
// MoE or the column is missing or of another width.
MoeRoutingLog routing_replay_log(const QwenForCausalLM& model, const MicroBatch& micro_batch);

}  // namespace aspen::train
