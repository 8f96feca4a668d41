// The tiny RL run every end-to-end test starts from (a 1-layer, 32-wide built-in model,
// 20 SFT steps, 4 prompts x 4 samples, 4 iterations), as key=value overrides: in-process
// tests parse them (tests/pipeline/tiny_run.h), tests of the `aspen` binary pass them
// on its command line. Later overrides win, so a test appends what it changes.
#pragma once

#include <string>
#include <vector>

namespace aspen::testing {

inline std::vector<std::string> tiny_run_overrides() {
  return {"model.hidden_size=32",       "model.num_layers=1", "model.head_dim=8",
          "model.intermediate_size=64", "train.sft_steps=20", "train.sft_batch_size=8",
          "train.iterations=4",         "rollout.n=4",        "rollout.prompts_per_iteration=4",
          "data.train_size=200",        "data.eval_size=16",  "logging.console=false",
          "logging.eval_every=0",       "train.lr=1e-3"};
}

}  // namespace aspen::testing
