// The tensor-parallel layout of a Qwen model: for every HF parameter name, how it
// is split over TP ranks (parallel/shard_spec.h). Megatron's scheme:
//   q_proj weight/bias         column-parallel, blocks = attention heads (dim 0)
//   k_proj, v_proj weight/bias column-parallel, blocks = kv heads; with fewer kv
//                              heads than ranks each kv head is replicated on
//                              size / kv_heads ranks (GQA: the q heads of a rank
//                              always map to the kv head it holds)
//   o_proj weight              row-parallel, blocks = attention heads (dim 1)
//   gate_proj, up_proj         column-parallel, blocks = intermediate columns (dim 0)
//   down_proj                  row-parallel, blocks = intermediate columns (dim 1)
//   mlp.experts.{j}.*_proj     each expert as the dense MLP, over moe_intermediate_size
//   mlp.gate (the MoE router)  replicated
//   embed_tokens, lm_head      vocab-parallel, blocks = vocabulary rows (dim 0)
//   every norm weight          replicated (dim -1)
//   *.lora_A.weight, *.lora_B.weight   a LoRA adapter: A split like a row-parallel
//                              target's input (dim 1), B like a column-parallel
//                              target's output (dim 0), the other whole (model/lora.h)
// validate_tp_size: aspen::Error naming the config field that TP size `size` cannot
// split (heads, kv heads, intermediate size, vocabulary).
#pragma once

#include <string>

#include "aspen/io/hf_config.h"
#include "aspen/model/imports.h"
#include "aspen/parallel/shard_spec.h"

namespace aspen::model {

ShardSpec qwen_shard_spec(const std::string& hf_name, const ModelConfig& config);

void validate_tp_size(const ModelConfig& config, int size);

}  // namespace aspen::model
