// The synthetic benchmark environment in a whole run (rollout.environment.kind synthetic,
// agent/synthetic_environment.h; `aspen bench pipeline --tool-latency`, issue #35): a tiny
// async run's trajectories have every configured turn, a tool call after each but the
// last, and the tool_wait bubble is measured; the config refuses more synthetic turns
// than max_turns allows, naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/pipeline/rl_run.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

TrainConfig synthetic_run(const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {"rollout.environment.kind=synthetic",
                                        "rollout.environment.chat_template=qwen3",
                                        "rollout.environment.synthetic_turns=3",
                                        "rollout.environment.max_turns=3",
                                        "rollout.environment.tool_latency_ms=20",
                                        "rollout.environment.tool_latency_sigma=0.5",
                                        "rollout.environment.observation_tokens=8",
                                        "rollout.environment.max_trajectory_tokens=232",
                                        "rollout.max_tokens=8",
                                        "model.tokenizer_vocab=300",
                                        "train.sft_steps=0",
                                        "train.iterations=2",
                                        "pipeline.mode=async"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return testing::tiny_run_config(overrides);
}

TEST(SyntheticEnvironmentRun, AnAsyncRunHasEveryTurnAndMeasuresToolWait) {
  const TrainConfig config = synthetic_run({});
  RlSetup setup = build_rl_setup(config);
  const std::string dir = ::testing::TempDir() + "/aspen_synthetic_env_run";
  std::filesystem::remove_all(dir);
  run_rl(config, setup, RunOptions{dir});
  std::ifstream metrics(dir + "/metrics.jsonl");
  int rl_lines = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto json = nlohmann::json::parse(line);
    if (json["phase"] != "rl") continue;
    ++rl_lines;
    // Room for every turn (3 x 8 model tokens + 2 observations of 8 digits and their
    // template wrapping, under 96 tokens even byte by byte): each trajectory runs its
    // three turns, whatever the random model writes.
    EXPECT_DOUBLE_EQ(json.at("turns_mean").get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(json.at("tool_calls_mean").get<double>(), 2.0);
    EXPECT_GT(json.at("tool_wait_s_mean").get<double>(), 2 * 0.02 * 0.3)
        << "two calls of a 20 ms median each";
    ASSERT_TRUE(json.at("bubbles").contains("tool_wait"));
    EXPECT_GE(json["bubbles"]["tool_wait"].get<double>(), 0.0);
  }
  EXPECT_EQ(rl_lines, 2);
}

TEST(SyntheticEnvironmentRun, TheConfigRefusesMoreTurnsThanMaxTurns) {
  try {
    synthetic_run({"rollout.environment.synthetic_turns=4"});
    ADD_FAILURE() << "accepted 4 synthetic turns with max_turns 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.environment.synthetic_turns"), std::string::npos)
        << e.what();
  }
  try {
    synthetic_run({"rollout.environment.tool_latency_ms=-5"});
    ADD_FAILURE() << "accepted a negative latency";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.environment.tool_latency_ms"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aspen::pipeline
