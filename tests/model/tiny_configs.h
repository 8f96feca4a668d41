// Tiny Qwen configurations covering each architecture switch the model has.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "aspen/io/hf_config.h"

namespace aspen::testing {

struct NamedConfig {
  std::string name;
  ModelConfig config;
};

// gtest prints test parameters; show the name, not the struct's bytes.
inline void PrintTo(const NamedConfig& named, std::ostream* out) {
  *out << named.name;
}

inline ModelConfig tiny_config(ModelFamily family, bool tied, int64_t head_dim) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = head_dim;
  c.rope_theta = family == ModelFamily::kQwen2 ? 10000.0 : 1000000.0;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied;
  c.attention_bias = family == ModelFamily::kQwen2;
  return c;
}

// Qwen3-MoE: 3 layers, the middle one dense (mlp_only_layers); 6 experts, top-2
// renormalised, each of width 16.
inline ModelConfig tiny_moe_config() {
  ModelConfig c = tiny_config(ModelFamily::kQwen3Moe, /*tied=*/false, /*head_dim=*/8);
  c.num_hidden_layers = 3;
  c.moe.num_experts = 6;
  c.moe.num_experts_per_tok = 2;
  c.moe.moe_intermediate_size = 16;
  c.moe.mlp_only_layers = {1};
  c.moe.norm_topk_prob = true;
  return c;
}

// DeepSeek-V3: 3 layers, layer 0 dense; MLA with a compressed query (rank 12), latent
// rank 16, rope 8 of a 20-wide query/key head, values 10 wide; 8 experts in 4 groups,
// 2 groups and top-2 per token, scaled 2.5, one shared expert.
inline ModelConfig tiny_deepseek_config() {
  ModelConfig c = tiny_config(ModelFamily::kDeepseekV3, /*tied=*/false, /*head_dim=*/8);
  c.num_hidden_layers = 3;
  c.num_key_value_heads = c.num_attention_heads;
  c.rope_theta = 10000.0;
  c.mla.q_lora_rank = 12;
  c.mla.kv_lora_rank = 16;
  c.mla.qk_nope_head_dim = 12;
  c.mla.qk_rope_head_dim = 8;
  c.mla.v_head_dim = 10;
  c.moe.scoring = RouterScoring::kSigmoidGroupLimited;
  c.moe.num_experts = 8;
  c.moe.num_experts_per_tok = 2;
  c.moe.moe_intermediate_size = 16;
  c.moe.norm_topk_prob = true;
  c.moe.n_group = 4;
  c.moe.topk_group = 2;
  c.moe.routed_scaling_factor = 2.5;
  c.moe.n_shared_experts = 1;
  c.moe.first_k_dense_replace = 1;
  return c;
}

inline std::vector<NamedConfig> tiny_configs() {
  return {
      {"Qwen2TiedBias", tiny_config(ModelFamily::kQwen2, /*tied=*/true, /*head_dim=*/8)},
      {"Qwen2Untied", tiny_config(ModelFamily::kQwen2, /*tied=*/false, /*head_dim=*/8)},
      {"Qwen3HeadDim12Untied", tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/12)},
      {"Qwen3Tied", tiny_config(ModelFamily::kQwen3, /*tied=*/true, /*head_dim=*/8)},
      {"Qwen3Moe", tiny_moe_config()},
  };
}

}  // namespace aspen::testing
