// ModelConfig: the architecture of a pre-norm decoder - Qwen2/Qwen2.5/Qwen3, dense or
// mixture-of-experts, and DeepSeek-V3 - read from (and written to) an HF `config.json`.
//
// Supported: model_type "qwen2" (architectures Qwen2ForCausalLM), "qwen3"
// (Qwen3ForCausalLM), "qwen3_moe" (Qwen3MoeForCausalLM: Qwen3's attention with
// sparse MoE MLPs, MoeConfig below) and "deepseek_v3" (DeepseekV3ForCausalLM:
// multi-head latent attention, MlaConfig, with sigmoid-scored group-limited MoE and
// shared experts after first_k_dense_replace dense layers). Anything this code would
// silently compute wrongly is an error naming config.json and the key: another
// model_type/architecture, rope scaling other than none or YaRN, an enabled sliding
// window, a non-silu hidden_act, a DeepSeek topk_method other than noaux_tc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/io/imports.h"

namespace aspen::io {

enum class ModelFamily { kQwen2, kQwen3, kQwen3Moe, kDeepseekV3 };

// How a MoE router turns its logits into the top-k choice and the combine weights.
//   kSoftmax (Qwen3-MoE): p = softmax(logits); the k largest p; weights p (renormalised
//     with norm_topk_prob).
//   kSigmoidGroupLimited (DeepSeek-V3, topk_method "noaux_tc"): s = sigmoid(logits);
//     the choice ranks s + e_score_correction_bias, only inside the topk_group groups
//     (of n_group equal groups) whose two best biased scores sum highest; the weights
//     are the unbiased s of the chosen (renormalised with norm_topk_prob) times
//     routed_scaling_factor.
enum class RouterScoring { kSoftmax, kSigmoidGroupLimited };

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
  // DeepSeek-V3 (transformers' DeepseekV3Config names; defaults are Qwen3-MoE's behaviour).
  RouterScoring scoring = RouterScoring::kSoftmax;
  int64_t n_group = 1;       // expert groups for the group-limited choice
  int64_t topk_group = 1;    // groups a token may route into
  double routed_scaling_factor = 1.0;
  int64_t n_shared_experts = 0;  // always-on experts of width n * moe_intermediate_size
  int64_t first_k_dense_replace = 0;  // layers [0, k) are dense

  bool operator==(const MoeConfig& other) const {
    return num_experts == other.num_experts && num_experts_per_tok == other.num_experts_per_tok &&
           moe_intermediate_size == other.moe_intermediate_size &&
           decoder_sparse_step == other.decoder_sparse_step &&
           mlp_only_layers == other.mlp_only_layers && norm_topk_prob == other.norm_topk_prob &&
           router_aux_loss_coef == other.router_aux_loss_coef && scoring == other.scoring &&
           n_group == other.n_group && topk_group == other.topk_group &&
           routed_scaling_factor == other.routed_scaling_factor &&
           n_shared_experts == other.n_shared_experts &&
           first_k_dense_replace == other.first_k_dense_replace;
  }
};

// RoPE scaling, from "rope_scaling" (HF's older key, also "type") or transformers 5's
// "rope_parameters" (rope_type). YaRN (arXiv 2309.00071, transformers'
// _compute_yarn_parameters): the inverse frequencies blend interpolated (/ factor) and
// original ones by a linear ramp over the dimensions between the beta_fast and
// beta_slow correction bounds (floored/ceiled when truncate), and cos/sin are scaled by
// attention_factor (when not given: mscale(factor, mscale) / mscale(factor,
// mscale_all_dim) if both are given, else mscale(factor) = 0.1 ln(factor) + 1).
// DeepSeek-V3 also multiplies its softmax scale by mscale(factor, mscale_all_dim)^2.
struct RopeScaling {
  bool yarn = false;  // false: plain RoPE
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0: not given
  double mscale_all_dim = 0.0;  // 0: not given
  double attention_factor = 0.0;  // 0: derived as above
  bool truncate = true;

  // The cos/sin multiplier (1 for plain RoPE).
  double cos_sin_scale() const;
  bool operator==(const RopeScaling& other) const {
    return yarn == other.yarn && factor == other.factor &&
           original_max_position_embeddings == other.original_max_position_embeddings &&
           beta_fast == other.beta_fast && beta_slow == other.beta_slow &&
           mscale == other.mscale && mscale_all_dim == other.mscale_all_dim &&
           attention_factor == other.attention_factor && truncate == other.truncate;
  }
};
// 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1 (YaRN's attention temperature).
double yarn_mscale(double scale, double mscale = 1.0);

// Multi-head latent attention (DeepSeek-V2/V3), transformers' names. Per head the query
// and key have a no-rope part (qk_nope_head_dim) and a rope part (qk_rope_head_dim); keys
// and values come from one compressed latent of kv_lora_rank per token (plus one rope key
// shared by all heads), which is all the paged KV cache stores.
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0 (config null): q_proj straight from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // The checkpoint's rope dimensions are interleaved pairs (x0, x1), (x2, x3), ...
  bool rope_interleave = true;
  // Multi-token-prediction modules stored after the decoder layers: not used (their
  // weights are skipped on load, which the log says), kept for the round trip.
  int64_t num_nextn_predict_layers = 0;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool operator==(const MlaConfig& other) const {
    return q_lora_rank == other.q_lora_rank && kv_lora_rank == other.kv_lora_rank &&
           qk_nope_head_dim == other.qk_nope_head_dim &&
           qk_rope_head_dim == other.qk_rope_head_dim && v_head_dim == other.v_head_dim &&
           rope_interleave == other.rope_interleave &&
           num_nextn_predict_layers == other.num_nextn_predict_layers;
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
  // explicit in Qwen3; hidden_size / num_attention_heads in Qwen2; the rope part
  // (qk_rope_head_dim) in DeepSeek-V3, as transformers sets it: the RoPE table's width.
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 32768;
  double rope_theta = 1000000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (always true for Qwen2)
  std::string torch_dtype = "bfloat16";  // dtype the checkpoint declares
  int64_t bos_token_id = -1;  // -1: absent
  int64_t eos_token_id = -1;
  MoeConfig moe;  // kQwen3Moe and kDeepseekV3
  MlaConfig mla;  // kDeepseekV3

  // Qwen3 (dense and MoE) normalises q and k per head (q_norm/k_norm); Qwen2 does not.
  bool has_qk_norm() const {
    return family == ModelFamily::kQwen3 || family == ModelFamily::kQwen3Moe;
  }
  bool is_moe() const {
    return family == ModelFamily::kQwen3Moe || family == ModelFamily::kDeepseekV3;
  }
  bool is_mla() const { return family == ModelFamily::kDeepseekV3; }
  // Whether decoder layer `layer` has a sparse MoE block (transformers' rules: above
  // for Qwen3-MoE; layer >= first_k_dense_replace for DeepSeek-V3).
  bool is_sparse_layer(int64_t layer) const;
  std::string model_type() const;     // "qwen2", "qwen3", "qwen3_moe" or "deepseek_v3"
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

}  // namespace aspen::io
