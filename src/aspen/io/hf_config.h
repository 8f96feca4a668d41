// ModelConfig: the architecture of a Qwen2/Qwen2.5/Qwen3 decoder, dense or
// mixture-of-experts, read from (and written to) an HF `config.json`.
//
// Supported: model_type "qwen2" (architectures Qwen2ForCausalLM), "qwen3"
// (Qwen3ForCausalLM) and "qwen3_moe" (Qwen3MoeForCausalLM: Qwen3's attention with
// sparse MoE MLPs, MoeConfig below). Anything this code would silently compute wrongly is an
// error naming config.json and the key: another model_type/architecture,
// rope_scaling other than null, an enabled sliding window, a non-silu hidden_act.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aspen {

enum class ModelFamily { kQwen2, kQwen3, kQwen3Moe };

// The mixture-of-experts part of a Qwen3-MoE config, with transformers'
// Qwen3MoeConfig names and meaning. Layer i has a sparse MoE block instead of the
// dense MLP when num_experts > 0, i is not in mlp_only_layers and
// (i + 1) % decoder_sparse_step == 0 (is_sparse_layer).
struct MoeConfig {
  int64_t num_experts = 0;  // 0: every layer is dense ("num_experts" / "num_local_experts")
  int64_t num_experts_per_tok = 0;    // k of the router's top-k
  int64_t moe_intermediate_size = 0;  // each expert's MLP width
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;  // dense layers among the sparse ones
  bool norm_topk_prob = false;  // renormalise the k chosen probabilities to sum to 1
  // What the checkpoint declares for its load-balancing loss. Kept for the round
  // trip only: Aspen's training takes its coefficient from
  // algorithm.router_aux_loss_coef (transformers too adds the loss only when asked).
  double router_aux_loss_coef = 0.001;

  bool operator==(const MoeConfig& other) const {
    return num_experts == other.num_experts && num_experts_per_tok == other.num_experts_per_tok &&
           moe_intermediate_size == other.moe_intermediate_size &&
           decoder_sparse_step == other.decoder_sparse_step &&
           mlp_only_layers == other.mlp_only_layers && norm_topk_prob == other.norm_topk_prob &&
           router_aux_loss_coef == other.router_aux_loss_coef;
  }
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kQwen3;
  int64_t vocab_size = 151936;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // explicit in Qwen3; hidden_size / num_attention_heads in Qwen2
  int64_t max_position_embeddings = 32768;
  double rope_theta = 1000000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (always true for Qwen2)
  std::string torch_dtype = "bfloat16";  // dtype the checkpoint declares
  int64_t bos_token_id = -1;  // -1: absent
  int64_t eos_token_id = -1;
  MoeConfig moe;  // kQwen3Moe only

  // Qwen3 (dense and MoE) normalises q and k per head (q_norm/k_norm); Qwen2 does not.
  bool has_qk_norm() const { return family != ModelFamily::kQwen2; }
  bool is_moe() const { return family == ModelFamily::kQwen3Moe; }
  // Whether decoder layer `layer` has a sparse MoE block (transformers' rule, above).
  bool is_sparse_layer(int64_t layer) const;
  std::string model_type() const;     // "qwen2", "qwen3" or "qwen3_moe"
  std::string architecture() const;   // "Qwen2ForCausalLM", ...

  // Throws aspen::Error(naming `source`) if the shapes are inconsistent
  // (heads not divisible by kv heads, non-positive sizes, ...).
  void validate(const std::string& source) const;
};

// `dense` with every MLP a sparse block of `num_experts` experts, top `experts_per_tok`
// renormalised (as Qwen3-30B-A3B), each of width intermediate_size / experts_per_tok:
// the same active MLP weights per token, for comparing a MoE with its dense twin.
// aspen::Error when experts_per_tok does not divide intermediate_size or exceeds
// num_experts.
ModelConfig moe_variant(const ModelConfig& dense, int64_t num_experts, int64_t experts_per_tok);

// Parses config.json text. `source` (usually the path) names the input in errors.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& source);
ModelConfig load_hf_config(const std::string& path);
// Serialises to HF config.json text that transformers loads as the same architecture.
std::string to_hf_config_json(const ModelConfig& config);

}  // namespace aspen
