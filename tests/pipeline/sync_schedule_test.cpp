// A short end-to-end run of the synchronous schedule on a tiny built-in model:
// every stage runs through the dock, metrics are written and finite, the final
// policy is exported in HF layout and loads back.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/pipeline/rl_run.h"
#include "swap_check.h"
#include "tiny_run.h"

namespace aspen {
namespace {

void expect_finite_numbers(const nlohmann::json& value, const std::string& where) {
  if (value.is_number()) {
    EXPECT_TRUE(std::isfinite(value.get<double>())) << where;
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) expect_finite_numbers(item, where + "." + key);
  }
}

TEST(SyncSchedule, ShortRunWritesFiniteMetricsAndAnHfCheckpoint) {
  for (const std::string algorithm : {"grpo", "dapo", "reinforce_pp", "ppo"}) {
    const TrainConfig parsed = testing::tiny_run_config(
        {"train.iterations=3", "train.lr=1e-5", "logging.eval_every=10", "algorithm.kl_coef=0.01",
         "train.epochs=2", "train.mini_batch_size=8", "algorithm.name=" + algorithm});
    RlSetup setup = build_rl_setup(parsed);
    const std::string dir = ::testing::TempDir() + "/aspen_sync_" + algorithm;
    std::filesystem::remove_all(dir);
    const nlohmann::json summary = run_rl(parsed, setup, RunOptions{dir});
    EXPECT_EQ(summary["iterations"], 3);
    EXPECT_GE(summary["samples"].get<int64_t>(), 3 * 16);

    std::ifstream metrics(dir + "/metrics.jsonl");
    int rl_lines = 0;
    for (std::string line; std::getline(metrics, line);) {
      const auto json = nlohmann::json::parse(line);
      expect_finite_numbers(json, algorithm);
      if (json["phase"] == "rl") {
        ++rl_lines;
        for (const char* key : {"reward_mean", "reward_std", "accuracy", "response_length_mean",
                                "response_length_max", "kl", "entropy", "clip_frac", "grad_norm",
                                "lr", "stage_seconds", "tokens_per_second"}) {
          EXPECT_TRUE(json.contains(key)) << key;
        }
      }
    }
    EXPECT_EQ(rl_lines, 3);
    const QwenForCausalLM reloaded = load_pretrained_model(dir + "/final");
    EXPECT_EQ(reloaded->config.vocab_size, setup.model->config.vocab_size);
    EXPECT_TRUE(std::filesystem::exists(dir + "/final/tokenizer.json"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/summary.json"));
  }
}

TEST(SyncSchedule, SwappingTheOptimizerStateOutDuringRolloutChangesNothing) {
  // Moments leave memory before each rollout and come back before the update.
  testing::expect_swap_changes_nothing({}, "sync");
}

}  // namespace
}  // namespace aspen
