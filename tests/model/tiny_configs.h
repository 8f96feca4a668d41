// The tiny Qwen configurations covering each architecture switch the model has, as
// the model tests' parameter list (the builders: support/tiny_model_configs.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "aspen/io/hf_config.h"
#include "support/tiny_model_configs.h"

namespace aspen::testing {

using namespace aspen::model;

struct NamedConfig {
  std::string name;
  ModelConfig config;
};

// gtest prints test parameters; show the name, not the struct's bytes.
inline void PrintTo(const NamedConfig& named, std::ostream* out) {
  *out << named.name;
}

inline std::vector<NamedConfig> tiny_configs() {
  return {
      {"Qwen2TiedBias", tiny_config(ModelFamily::kQwen2, /*tied=*/true, /*head_dim=*/8)},
      {"Qwen2Untied", tiny_config(ModelFamily::kQwen2, /*tied=*/false, /*head_dim=*/8)},
      {"Qwen3HeadDim12Untied", tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/12)},
      {"Qwen3Tied", tiny_config(ModelFamily::kQwen3, /*tied=*/true, /*head_dim=*/8)},
      {"Qwen3Moe", tiny_moe_config()},
  };
}

}  // namespace aspen::testing
