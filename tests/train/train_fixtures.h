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
#include "support/tiny_model_configs.h"

namespace aspen::testing {

using namespace aspen::train;

inline QwenForCausalLM tiny_model(uint64_t seed = 1, torch::ScalarType dtype = torch::kFloat,
                                  bool tied = false) {
  // initializer_range 0.02 gives near-uniform logits; fine for gradients and tests.
  return make_random_model(tiny_train_config(tied), seed, dtype);
}

// Qwen3-MoE of the same size: 4 experts of width 8, top-2, layer 1 dense.
inline QwenForCausalLM tiny_moe_model(uint64_t seed = 1, torch::ScalarType dtype = torch::kFloat) {
  const ModelConfig c =
      with_tiny_experts(tiny_train_config(), /*experts=*/4, /*width=*/8, /*norm_topk_prob=*/false);
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
