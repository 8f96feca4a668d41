// What a model directory says about generation, turned into the engine's terms once:
// the EOS ids that end a sample, and the sampling defaults of generation_config.json.
//   EOS: generation_config.json's eos_token_id (an int or a list) when it has one, else
//        config.json's; HF's generate() resolves them in the same order.
//   Sampling: temperature, top_p and top_k from generation_config.json over vLLM's
//        defaults (1.0, 1.0, off); do_sample false means greedy. vLLM's
//        `--generation-config auto` behaves the same.
#pragma once

#include <optional>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/io/model_dir.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/sampling_params.h"

namespace aspen::rollout {

// May be empty (a model that declares no EOS token).
std::vector<TokenId> model_eos_token_ids(const ModelConfig& config,
                                         const std::optional<GenerationConfig>& generation);

SamplingParams generation_defaults(const std::optional<GenerationConfig>& generation);

}  // namespace aspen::rollout
