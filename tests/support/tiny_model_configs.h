// The tiny ModelConfigs of the tests, in one place: one builder of a dense model from
// its sizes, and the named variants the tests use. A test's numbers are part of what
// it checks (tensor-parallel splits, expert sharding, a KV cache's block count, a
// parity with HF), so every variant keeps the exact sizes its tests were written for;
// a new test names the variant it needs, or adds one here, rather than building its
// own. Fields a builder does not set keep ModelConfig's defaults (rope_theta 1e6,
// rms_norm_eps 1e-6, untied, max_position_embeddings 32768).
#pragma once

#include <cstdint>

#include "aspen/io/hf_config.h"

namespace aspen::testing {

using namespace aspen::io;

// The sizes of a tiny dense model, in ModelConfig's order.
struct TinyDims {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim;
};

// A dense model of `family` with these sizes; Qwen2's attention carries a bias, as
// every Qwen2 checkpoint's does.
inline ModelConfig tiny_model_config(ModelFamily family, const TinyDims& dims) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = dims.vocab;
  c.hidden_size = dims.hidden;
  c.intermediate_size = dims.intermediate;
  c.num_hidden_layers = dims.layers;
  c.num_attention_heads = dims.heads;
  c.num_key_value_heads = dims.kv_heads;
  c.head_dim = dims.head_dim;
  c.attention_bias = family == ModelFamily::kQwen2;
  return c;
}

// Turns `c` into a Qwen3-MoE whose layer 1 stays dense (mlp_only_layers) and whose
// other layers route each token to the top 2 of `experts` experts of width `width`.
inline ModelConfig with_tiny_experts(ModelConfig c, int64_t experts, int64_t width,
                                     bool norm_topk_prob) {
  c.family = ModelFamily::kQwen3Moe;
  c.moe.num_experts = experts;
  c.moe.num_experts_per_tok = 2;
  c.moe.moe_intermediate_size = width;
  c.moe.mlp_only_layers = {1};
  c.moe.norm_topk_prob = norm_topk_prob;
  return c;
}

// ---- The model tests' architecture matrix (model/tiny_configs.h lists it).

// Vocabulary 50, hidden 32, 2 layers of 4 heads over 2 KV heads; Qwen2 with its own
// rope_theta (10000), Qwen3 with the default.
inline ModelConfig tiny_config(ModelFamily family, bool tied, int64_t head_dim) {
  ModelConfig c = tiny_model_config(family, {50, 32, 48, 2, 4, 2, head_dim});
  c.rope_theta = family == ModelFamily::kQwen2 ? 10000.0 : 1000000.0;
  c.tie_word_embeddings = tied;
  return c;
}

// Qwen3-MoE: 3 layers, the middle one dense (mlp_only_layers); 6 experts, top-2
// renormalised, each of width 16.
inline ModelConfig tiny_moe_config() {
  ModelConfig c = with_tiny_experts(
      tiny_config(ModelFamily::kQwen3Moe, /*tied=*/false, /*head_dim=*/8), 6, 16, true);
  c.num_hidden_layers = 3;
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

// ---- The rollout engine's tests: vocabulary 97 (prompts are built modulo 97), head_dim
// 16, a context of 512, tied embeddings.
inline ModelConfig tiny_rollout_config() {
  ModelConfig c = tiny_model_config(ModelFamily::kQwen3, {97, 32, 64, 2, 4, 2, 16});
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = true;
  return c;
}

// ---- The train tests: vocabulary 16, hidden 16, 2 heads over one KV head.
inline ModelConfig tiny_train_config(bool tied = false) {
  ModelConfig c = tiny_model_config(ModelFamily::kQwen3, {16, 16, 32, 2, 2, 1, 8});
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

// ---- The distributed rank programs (parallel/worker): sizes that split evenly over
// 2 and 4 tensor-parallel ranks.

// The resharding and checkpoint programs' Qwen2 (vocabulary 64), with `kv_heads` KV
// heads.
inline ModelConfig tiny_tp_config(int64_t kv_heads) {
  return tiny_model_config(ModelFamily::kQwen2, {64, 32, 48, 2, 4, kv_heads, 8});
}

// The tensor-parallel model programs' cases: vocabulary 96, rope_theta 10000.
inline ModelConfig tiny_parallel_config(ModelFamily family, int64_t heads, int64_t kv_heads,
                                        int64_t head_dim, bool tied) {
  ModelConfig c = tiny_model_config(family, {96, 32, 64, 2, heads, kv_heads, head_dim});
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

// Their Qwen3-MoE with `layers` layers: 4 experts of width 16, top-2 renormalised,
// layer 1 dense.
inline ModelConfig tiny_parallel_moe_config(int64_t layers) {
  ModelConfig c = with_tiny_experts(
      tiny_parallel_config(ModelFamily::kQwen3, 4, 2, 8, /*tied=*/false), 4, 16, true);
  c.num_hidden_layers = layers;
  return c;
}

}  // namespace aspen::testing
