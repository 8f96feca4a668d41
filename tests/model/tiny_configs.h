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

inline std::vector<NamedConfig> tiny_configs() {
  return {
      {"Qwen2TiedBias", tiny_config(ModelFamily::kQwen2, /*tied=*/true, /*head_dim=*/8)},
      {"Qwen2Untied", tiny_config(ModelFamily::kQwen2, /*tied=*/false, /*head_dim=*/8)},
      {"Qwen3HeadDim12Untied", tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/12)},
      {"Qwen3Tied", tiny_config(ModelFamily::kQwen3, /*tied=*/true, /*head_dim=*/8)},
  };
}

}  // namespace aspen::testing
