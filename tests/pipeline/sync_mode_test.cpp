// A short end-to-end run of sync mode (the iteration engine at eta 0) on a tiny
// built-in model:
// every stage runs through the dock, metrics are written and finite, the final
// policy is exported in HF layout and loads back.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/pipeline/iteration_engine.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_run.h"
#include "dynamic_sampling_checks.h"
#include "swap_check.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

void expect_finite_numbers(const nlohmann::json& value, const std::string& where) {
  if (value.is_number()) {
    EXPECT_TRUE(std::isfinite(value.get<double>())) << where;
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) expect_finite_numbers(item, where + "." + key);
  }
}

TEST(SyncMode, ShortRunWritesFiniteMetricsAndAnHfCheckpoint) {
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

TEST(SyncMode, SwappingTheOptimizerStateOutDuringRolloutChangesNothing) {
  // Moments leave memory before each rollout and come back before the update.
  testing::expect_swap_changes_nothing({}, "sync");
}

// Every sample of a prompt whose text hashes even scores the same (a group with zero
// advantage everywhere); the others score by the parity of the response's length.
class HalfInformativeVerifier : public Verifier {
 public:
  std::string name() const override { return "half_informative"; }
  double score(const RewardInput& input) const override {
    if (uninformative(input.prompt)) return 0.5;
    return input.response.size() % 2 == 0 ? 1.0 : 0.0;
  }
  static bool uninformative(const std::string& prompt) {
    return std::hash<std::string>{}(prompt) % 2 == 0;
  }
};

class ConstantVerifier : public Verifier {
 public:
  std::string name() const override { return "constant"; }
  double score(const RewardInput&) const override { return 1.0; }
};

TEST(DynamicSampling, TrainsOnlyInformativeGroupsAndRefillsTheBatch) {
  // Sync (eta 0) and async (eta 1) both fill each batch with informative groups, in
  // at most 4 sampling rounds, and never train a dropped group.
  for (const std::string mode : {"sync", "async"}) {
    SCOPED_TRACE(mode);
    const TrainConfig config = testing::tiny_run_config(
        {"algorithm.name=dapo", "train.iterations=4", "pipeline.mode=" + mode,
         "pipeline.max_staleness=1", "rollout.max_tokens=12"});
    ASSERT_TRUE(config.algorithm.dynamic_sampling);
    RlSetup setup = build_rl_setup(config);
    setup.verifier = std::make_unique<HalfInformativeVerifier>();
    RlWorkers workers(config, setup);
    EngineContext context{config, setup, workers};
    const std::map<int64_t, int64_t> example_of = testing::drawn_examples(setup, config);
    auto engine = std::make_unique<IterationEngine>(context, std::nullopt);
    testing::DynamicSamplingTally tally;
    for (int64_t i = 0; i < config.train.iterations; ++i) {
      testing::expect_dynamic_sampling_iteration(engine->iteration(i), config, setup, example_of,
                                                 HalfInformativeVerifier::uninformative, tally);
    }
    engine->stop();
    EXPECT_GT(tally.dropped, 0) << "half the prompts are uninformative: some must have been drawn";
  }
}

TEST(DynamicSampling, SkipsTheUpdateWhenNoGroupIsInformativeAfterFourRounds) {
  const TrainConfig config =
      testing::tiny_run_config({"algorithm.name=dapo", "train.iterations=1"});
  RlSetup setup = build_rl_setup(config);
  setup.verifier = std::make_unique<ConstantVerifier>();
  RlWorkers workers(config, setup);
  EngineContext context{config, setup, workers};
  const auto before = setup.model->hf_state();
  std::map<std::string, torch::Tensor> copy;
  for (const auto& [name, tensor] : before) copy[name] = tensor.detach().clone();
  auto engine = std::make_unique<IterationEngine>(context, std::nullopt);
  const nlohmann::json line = engine->iteration(0);
  engine->stop();
  EXPECT_EQ(line["sampling_rounds"], 4);
  EXPECT_EQ(line["trained_groups"], 0);
  EXPECT_EQ(line["dropped_groups"], 16);  // 4 rounds of 4 groups
  EXPECT_EQ(line["trained_rows"], 0);
  EXPECT_EQ(line["policy_version"], 1);
  for (const auto& [name, tensor] : setup.model->hf_state()) {
    EXPECT_TRUE(torch::equal(tensor, copy.at(name))) << name << " changed without an update";
  }
}

}  // namespace
}  // namespace aspen::pipeline
