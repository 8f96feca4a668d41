// Shared by the pipeline tests: a run configuration small enough for CI (a 1-layer,
// 32-wide built-in model, 20 SFT steps, 4 prompts x 4 samples).
#pragma once

#include <string>
#include <vector>

#include "aspen/pipeline/train_config.h"

namespace aspen::testing {

// The tiny run, then `overrides` (key=value) on top.
inline TrainConfig tiny_run_config(const std::vector<std::string>& overrides = {}) {
  Config config = Config::empty("test");
  for (const std::string o :
       {"model.hidden_size=32", "model.num_layers=1", "model.head_dim=8",
        "model.intermediate_size=64", "train.sft_steps=20", "train.sft_batch_size=8",
        "train.iterations=4", "rollout.n=4", "rollout.prompts_per_iteration=4",
        "data.train_size=200", "data.eval_size=16", "logging.console=false",
        "logging.eval_every=0", "train.lr=1e-3"}) {
    config.apply_override(o);
  }
  for (const auto& o : overrides) config.apply_override(o);
  return parse_train_config(config);
}

}  // namespace aspen::testing
