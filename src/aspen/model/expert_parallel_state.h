// The expert-parallel model's state as the rest of Aspen sees it: which HF keys are
// experts, and the full model's state gathered from the EP ranks' shares.
//
// Under expert parallelism (qwen_moe_block.h) rank r of an EP group of size p holds
// experts [r*E/p, (r+1)*E/p) of every sparse layer, under their HF names, and the
// same replicated rest. gather_expert_parallel_state() all-gathers the experts (one
// flat buffer per call, in the parameters' dtype) so that every EP rank gets the full
// HF state: what publishing to full-model rollout instances, evaluation and the final
// checkpoint need. Collective over the model's EP group (every EP rank calls it).
// Without EP it is hf_state().
// Errors: aspen::Error when ranks hold differently shaped experts.
// Thread safety: one thread per rank (a collective).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

// "model.layers.{i}.mlp.experts.{j}.*": a routed expert's tensor (not a shared expert's,
// not the router's).
bool is_expert_parameter(const std::string& hf_name);
// Its expert index j; nullopt for any other key.
std::optional<int64_t> expert_index(const std::string& hf_name);

std::vector<std::pair<std::string, torch::Tensor>> gather_expert_parallel_state(
    const QwenForCausalLM& model);

}  // namespace aspen::model
