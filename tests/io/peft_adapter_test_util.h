// Adapters for the peft_adapter tests: random lora_A / lora_B tensors for the linears of
// a tiny Qwen3 (the sizes hf_reference.py's make gets, so PEFT can load them on it).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/peft_adapter.h"

namespace aspen::testing {

// A tiny Qwen3: hidden 16, intermediate 24, 2 layers, 2 heads over 1 KV head of 8.
struct TinyQwen3 {
  int64_t vocab = 32, hidden = 16, intermediate = 24, layers = 2, heads = 2, kv_heads = 1,
          head_dim = 8;

  // hf_reference.py make's options for this model.
  nlohmann::json make_options() const {
    return {{"arch", "qwen3"},  {"vocab", vocab},       {"hidden", hidden},
            {"intermediate", intermediate}, {"layers", layers}, {"heads", heads},
            {"kv_heads", kv_heads}, {"head_dim", head_dim}};
  }

  // {in_features, out_features} of a projection ("q_proj", ..., "down_proj").
  std::pair<int64_t, int64_t> linear(const std::string& leaf) const {
    if (leaf == "q_proj") return {hidden, heads * head_dim};
    if (leaf == "k_proj" || leaf == "v_proj") return {hidden, kv_heads * head_dim};
    if (leaf == "o_proj") return {heads * head_dim, hidden};
    if (leaf == "gate_proj" || leaf == "up_proj") return {hidden, intermediate};
    if (leaf == "down_proj") return {intermediate, hidden};
    throw std::invalid_argument("no linear " + leaf);
  }

  static std::string module(int64_t layer, const std::string& leaf) {
    const bool attention = leaf == "q_proj" || leaf == "k_proj" || leaf == "v_proj" ||
                           leaf == "o_proj";
    return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + leaf;
  }
};

inline const TinyQwen3 kTinyQwen3;

// An adapter on `targets` of every layer of `model`, A and B random (seeded).
inline io::LoraAdapter random_adapter(const TinyQwen3& model, io::LoraAdapterConfig config,
                                      uint64_t seed, torch::Dtype dtype = torch::kFloat32) {
  torch::manual_seed(seed);
  io::LoraAdapter adapter;
  adapter.config = std::move(config);
  for (int64_t layer = 0; layer < model.layers; ++layer) {
    for (const std::string& leaf : adapter.config.target_modules) {
      const auto [in, out] = model.linear(leaf);
      const std::string module = TinyQwen3::module(layer, leaf);
      adapter.tensors[io::lora_a_name(module)] =
          torch::randn({adapter.config.rank, in}).to(dtype);
      adapter.tensors[io::lora_b_name(module)] =
          torch::randn({out, adapter.config.rank}).to(dtype);
    }
  }
  return adapter;
}

inline io::LoraAdapterConfig lora_config(int64_t rank, double alpha,
                                         std::vector<std::string> targets) {
  io::LoraAdapterConfig config;
  config.rank = rank;
  config.alpha = alpha;
  config.target_modules = std::move(targets);
  return config;
}

}  // namespace aspen::testing
