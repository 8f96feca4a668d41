// Shared by the pipeline tests: a run configuration small enough for CI (a 1-layer,
// 32-wide built-in model, 20 SFT steps, 4 prompts x 4 samples).
#pragma once

#include <string>
#include <vector>

#include "aspen/config/train_config.h"
#include "support/tiny_run_overrides.h"

namespace aspen::testing {

using namespace aspen::pipeline;

// The tiny run, then `overrides` (key=value) on top.
inline TrainConfig tiny_run_config(const std::vector<std::string>& overrides = {}) {
  Config config = Config::empty("test");
  for (const std::string& o : tiny_run_overrides()) config.apply_override(o);
  for (const auto& o : overrides) config.apply_override(o);
  return parse_train_config(config);
}

}  // namespace aspen::testing
