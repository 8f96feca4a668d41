// The seeded tiny Qwen model the resharding and checkpoint rank programs share: every
// rank (and the test process) builds bit-identical "full" weights from it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "aspen/model/qwen_model.h"

namespace aspen::testing {

inline ModelConfig tiny_tp_config(int64_t kv_heads) {
  ModelConfig c;
  c.family = ModelFamily::kQwen2;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 8;
  c.attention_bias = true;
  return c;
}

inline std::vector<std::pair<std::string, torch::Tensor>> seeded_full_weights(
    const ModelConfig& config, uint64_t seed = 11) {
  torch::manual_seed(seed);
  QwenForCausalLM model(config);
  std::vector<std::pair<std::string, torch::Tensor>> full;
  for (const auto& [name, tensor] : model->hf_state()) full.emplace_back(name, tensor.detach());
  return full;
}

}  // namespace aspen::testing
