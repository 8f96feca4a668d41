// The whole policy from its pipeline stages: each stage of a pipeline-parallel model
// (parallel/pipeline_stages.h) holds its decoder layers under their global HF names,
// the first stage the embedding, the last the final norm and the head. What needs the
// whole model - the rollout engines, evaluation, the exported final/, a checkpoint's
// policy and reference - gets every stage's tensors by name.
//
// gather_pipeline_stages is collective over the model's pipeline group: stage s in turn
// broadcasts the list of its tensors (name, shape, dtype) and then their values as one
// flat buffer per dtype, so every stage ends with the same whole state (as
// QwenForCausalLM::hf_state of the one-process model: the tied head is the first
// stage's embedding, the last stage's copy of it is not sent again). Without PP it
// returns hf_state()'s tensors (copies) and touches no group. Under PP x EP (the EP
// group a stage's data-parallel ranks, each holding some of the stage's experts) each
// stage first gathers its experts over its EP group (gather_expert_parallel_state),
// then the stages are gathered as above over each EP rank's pipeline group: collective
// over both, every rank of the stage's EP group and of its pipeline group calls it.
// Errors: aspen::Error from a failed collective. Thread safety: the pipeline group's
// one thread.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

std::map<std::string, torch::Tensor> gather_pipeline_stages(const QwenForCausalLM& model);
// The same for tensors `held` by this stage of `pp` under their HF names (whole: a
// tensor-parallel stage gathers its shards first), e.g. what a TP gather returned.
std::map<std::string, torch::Tensor> gather_stage_tensors(
    const PipelineStages& pp, const std::vector<std::pair<std::string, torch::Tensor>>& held);

// Whether a stage's optimizer state or weights of `name` belong in its own checkpoint
// share: every tensor it holds except the last stage's copy of a tied embedding (the
// first stage writes that one), so each name is in exactly one share.
bool stage_writes(const QwenForCausalLM& model, const std::string& name);

}  // namespace aspen::pipeline
