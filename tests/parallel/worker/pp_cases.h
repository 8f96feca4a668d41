// What the pipeline-parallel trainer modes (pp_actor_modes.cpp, pp_critic_modes.cpp)
// share: the 3-layer models they split into stages, the seeded batch, and the scalar
// check against one process.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/train/train_batch.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"

namespace aspen::testing::pipeline_cases {

// 3 layers: over 2 stages {0, 1} and {2}, over 3 one each.
//   qwen3_dense  Qwen3 (q/k norms), untied head
//   qwen2_tied   Qwen2 with biases and a tied embedding: the first and last stage both
//                hold it (gradient summed; counted once in the clip norm)
//   qwen3_moe    Qwen3-MoE, layers 0 and 2 sparse (top-2 of 4 experts), layer 1 dense:
//                over 3 stages the middle one has no router but relays the routing
inline io::ModelConfig case_config(const std::string& name, const std::string& mode) {
  check_input(name == "qwen2_tied" || name == "qwen3_dense" || name == "qwen3_moe",
              "unknown case", mode + " " + name);
  if (name == "qwen3_moe") return tiny_parallel_moe_config(3);
  io::ModelConfig c = name == "qwen2_tied"
                          ? tiny_parallel_config(io::ModelFamily::kQwen2, 4, 2, 8, /*tied=*/true)
                          : tiny_parallel_config(io::ModelFamily::kQwen3, 4, 2, 12, /*tied=*/false);
  c.num_hidden_layers = 3;
  return c;
}

// 8 rows of unequal lengths; the advantages per token.
inline train::TrainBatch seeded_batch(int64_t vocab) {
  torch::manual_seed(23);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 5}, {4, 2}, {2, 7}, {5, 4},
                                                           {1, 3}, {6, 2}, {2, 4}, {4, 6}};
  train::TrainBatch batch;
  int64_t tokens = 0;
  for (const auto& [prompt, response] : shapes) {
    const torch::Tensor ids = torch::randint(vocab, {prompt + response}, torch::kLong);
    const int64_t* p = ids.data_ptr<int64_t>();
    batch.prompts.emplace_back(p, p + prompt);
    batch.responses.emplace_back(p + prompt, p + prompt + response);
    tokens += response;
  }
  batch.token_columns[train::columns::kAdvantages] = torch::randn({tokens});
  return batch;
}

inline void expect_near(double got, double want, const std::string& what,
                        const std::string& where) {
  check_input(std::abs(got - want) <= 1e-4 * std::abs(want) + 1e-6,
              what + " " + std::to_string(got) + ", one process " + std::to_string(want), where);
}

}  // namespace aspen::testing::pipeline_cases
