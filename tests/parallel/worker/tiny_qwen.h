// The seeded tiny Qwen model the resharding and checkpoint rank programs share: every
// rank (and the test process) builds bit-identical "full" weights from it
// (tiny_tp_config: support/tiny_model_configs.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "support/tiny_model_configs.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;

inline std::vector<std::pair<std::string, torch::Tensor>> seeded_full_weights(
    const ModelConfig& config, uint64_t seed = 11) {
  torch::manual_seed(seed);
  QwenForCausalLM model(config);
  std::vector<std::pair<std::string, torch::Tensor>> full;
  for (const auto& [name, tensor] : model->hf_state()) full.emplace_back(name, tensor.detach());
  return full;
}

}  // namespace aspen::testing
