// Shared by the schedules' swap tests: PPO (actor and critic moments) with
// placement.swap must train bit-identically to the same run without it.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "aspen/io/model_dir.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/rl_setup.h"
#include "tiny_run.h"

namespace aspen::testing {

using namespace aspen::pipeline;

// Runs 3 PPO iterations of the tiny run with `overrides` (the schedule), with and
// without swap, under TempDir()/aspen_swap_<name>_{0,1}, and compares them.
inline void expect_swap_changes_nothing(const std::vector<std::string>& overrides,
                                        const std::string& name) {
  auto run = [&](bool swap) {
    std::vector<std::string> all = overrides;
    for (const std::string o : {"train.iterations=3", "algorithm.name=ppo", "train.epochs=2",
                                "train.mini_batch_size=8"}) {
      all.push_back(o);
    }
    all.push_back(std::string("placement.swap=") + (swap ? "true" : "false"));
    const TrainConfig config = tiny_run_config(all);
    RlSetup setup = build_rl_setup(config);
    const std::string dir =
        ::testing::TempDir() + "/aspen_swap_" + name + "_" + std::to_string(swap);
    std::filesystem::remove_all(dir);
    run_rl(config, setup, RunOptions{dir});
    return dir;
  };
  const std::string plain = run(false);
  const std::string swapped = run(true);
  const auto lines = read_rl_metrics(swapped);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["swapped_bytes"], 0);  // no moments before the first step
  EXPECT_GT(lines[1]["swapped_bytes"].get<int64_t>(), 0);
  const auto reference = read_rl_metrics(plain);
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const char* key : {"grad_norm", "policy_loss", "value_loss"}) {
      EXPECT_EQ(lines[i][key], reference[i][key]) << key << " at " << i;
    }
  }
  const auto a = load_model_weights(plain + "/final");
  const auto b = load_model_weights(swapped + "/final");
  for (const auto& [tensor_name, tensor] : a) {
    EXPECT_TRUE(torch::equal(b.at(tensor_name), tensor)) << tensor_name;
  }
}

}  // namespace aspen::testing
