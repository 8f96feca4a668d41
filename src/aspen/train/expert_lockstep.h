// Lockstep for expert-parallel trainers.
//
// Every forward and backward of an expert-parallel model (model/qwen_moe_block.h) is a
// collective over its EP group: each sparse layer all-gathers the token counts and
// all-to-alls the tokens, whether a rank has tokens or not. Data-parallel ranks pack
// their own rows into micro-batches, so their counts can differ; an EP rank with fewer
// micro-batches (or with one whose rows have no response token) must still join the
// others' forwards and backwards. It does so with padding passes: a one-row
// micro-batch (one prompt token, one response token) run the same way as the real
// ones (same recompute setting), whose loss is multiplied by zero - every gradient it
// adds is exactly zero and it reports nothing.
//
// Ranks whose EP group is their TP group (replicated tokens) run the same micro-batches
// already: they need no lockstep (in_expert_lockstep is false).
// lockstep_count(model, n): the largest n over the model's EP group (n itself without
// lockstep). Collective: call it BEFORE the passes (a rank that asked after its own passes
// would meet the others' forwards with an all-reduce). padding_pass(model, ...): one
// padding forward (and backward when grad mode is on). Thread safety: one trainer
// thread per rank.
#pragma once

#include <cstdint>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"

namespace aspen::train {

// Whether the model's passes must be kept in step with its EP group's (above).
bool in_expert_lockstep(const QwenForCausalLM& model);
int64_t lockstep_count(const QwenForCausalLM& model, int64_t local_count);

// The padding pass's one-row micro-batch, for a pipeline of stages, which runs padding
// passes through its stages like real micro-batches (train/pipeline_actor.h).
MicroBatch padding_micro_batch(torch::Device device);

// One padding forward of `model` through response_logprobs (with `recompute` as the
// real micro-batches use it); under grad mode, its zero-weighted backward too.
void padding_pass(QwenForCausalLM& model, const LogprobHeadOptions& head, bool recompute);

}  // namespace aspen::train
