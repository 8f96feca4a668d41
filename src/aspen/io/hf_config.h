// ModelConfig: the architecture of a Qwen2/Qwen2.5/Qwen3 dense decoder, read from
// (and written to) an HF `config.json`.
//
// Supported: model_type "qwen2" (architectures Qwen2ForCausalLM) and "qwen3"
// (Qwen3ForCausalLM). Anything this code would silently compute wrongly is an
// error naming config.json and the key: another model_type/architecture,
// rope_scaling other than null, an enabled sliding window, a non-silu hidden_act.
#pragma once

#include <cstdint>
#include <string>

namespace aspen {

enum class ModelFamily { kQwen2, kQwen3 };

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

  // Qwen3 normalises q and k per head (q_norm/k_norm); Qwen2 does not.
  bool has_qk_norm() const { return family == ModelFamily::kQwen3; }
  std::string model_type() const { return family == ModelFamily::kQwen2 ? "qwen2" : "qwen3"; }

  // Throws aspen::Error(naming `source`) if the shapes are inconsistent
  // (heads not divisible by kv heads, non-positive sizes, ...).
  void validate(const std::string& source) const;
};

// Parses config.json text. `source` (usually the path) names the input in errors.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& source);
ModelConfig load_hf_config(const std::string& path);
// Serialises to HF config.json text that transformers loads as the same architecture.
std::string to_hf_config_json(const ModelConfig& config);

}  // namespace aspen
