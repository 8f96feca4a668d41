// Log-probs of a batch's response tokens on a pipeline-parallel model: the
// forward-only pass the actor's old log-probs and the reference's log-probs take
// when the model is one stage of a pipeline (model->pp enabled; QwenForCausalLM holds
// only its stage's layers).
//
// Every stage of the pipeline group calls pipeline_batch_logprobs with the same batch.
// The batch is packed by the balanced micro-batcher (train/micro_batches.h) exactly as
// batch_logprobs packs it; micro-batches go through the stages in order (a forward-only
// schedule: no backward, so no 1F1B interleaving is needed), the activations as
// pipeline_p2p messages, and the last stage scores its hidden states with the head.
// The last stage's [R] log-probs (and entropy) are then broadcast over the pipeline
// group, so every stage returns the same values as batch_logprobs on the whole model
// would: the caller (the actor's update reads old_logprobs on every stage, the loss is
// only computed on the last) needs no pipeline knowledge.
//
// Shapes as batch_logprobs: [R_total] in the batch's token-column order.
// Thread safety: as batch_logprobs; the pipeline group's one thread.
// Expert parallelism (PP x EP): the EP ranks of a stage run as many passes as the one
// with the most micro-batches, padding passes (expert_lockstep.h) after the real ones.
// Errors: aspen::Error for a bad message.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/train_batch.h"

namespace aspen::train {

TokenLogprobs pipeline_batch_logprobs(QwenForCausalLM& model, const TrainBatch& batch,
                                      int64_t max_tokens, const LogprobHeadOptions& head);

}  // namespace aspen::train
