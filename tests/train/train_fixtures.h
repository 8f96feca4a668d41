// Shared fixtures for the train tests: a tiny random Qwen model and small batches.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"
#include "aspen/train/train_batch.h"

namespace aspen::testing {

inline ModelConfig tiny_train_config(bool tied = false) {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.vocab_size = 16;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

inline QwenForCausalLM tiny_model(uint64_t seed = 1, torch::ScalarType dtype = torch::kFloat,
                                  bool tied = false) {
  // initializer_range 0.02 gives near-uniform logits; fine for gradients and tests.
  return make_random_model(tiny_train_config(tied), seed, dtype);
}

// Qwen3-MoE of the same size: 4 experts of width 8, top-2, layer 1 dense.
inline QwenForCausalLM tiny_moe_model(uint64_t seed = 1, torch::ScalarType dtype = torch::kFloat) {
  ModelConfig c = tiny_train_config();
  c.family = ModelFamily::kQwen3Moe;
  c.moe.num_experts = 4;
  c.moe.num_experts_per_tok = 2;
  c.moe.moe_intermediate_size = 8;
  c.moe.mlp_only_layers = {1};
  QwenForCausalLM model = make_random_model(c, seed, dtype);
  // A decisive router (HF's 0.02 init routes almost uniformly).
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find(".mlp.gate.weight") != std::string::npos) item.value().mul_(40.0);
  }
  return model;
}

// Rows with varied prompt/response lengths over vocab 16, deterministic.
inline TrainBatch tiny_batch(const std::vector<std::pair<int, int>>& lengths) {
  TrainBatch batch;
  int64_t next = 1;
  for (const auto& [prompt_len, response_len] : lengths) {
    std::vector<int64_t> prompt, response;
    for (int i = 0; i < prompt_len; ++i) prompt.push_back(next++ % 16);
    for (int i = 0; i < response_len; ++i) response.push_back((next++ * 7) % 16);
    batch.prompts.push_back(prompt);
    batch.responses.push_back(response);
  }
  return batch;
}

// Max |a - b| over all parameters of two models with the same layout.
inline double max_param_diff(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pa = a.named_parameters(true);
  auto pb = b.named_parameters(true);
  double diff = 0.0;
  for (const auto& item : pa) {
    diff = std::max(diff, (item.value().to(torch::kDouble) - pb[item.key()].to(torch::kDouble))
                              .abs()
                              .max()
                              .item<double>());
  }
  return diff;
}

}  // namespace aspen::testing
