// Bring-your-own-agent runs end to end (rollout.agent.command, issue #35 item 5): tiny
// runs whose trajectories are runs of an agent program written with the official
// `openai` client (tests/pipeline/data/byo_agent.py) against the rollout instance's own
// endpoint train for two iterations in sync and async mode and report turns, tool calls
// and the agent's counters; faulty programs (silent, late, crashing, garbage, 10 MB,
// wrong session) fail their own trajectories, which train with reward 0 (or, failing
// before their first call, drop their group), and a
// broken program ends the run with its error instead of hanging; the config refuses
// what an agent run cannot do, naming the key. (agent_loop_test.cpp checks that the
// dock rows hold exactly the tokens the client saw and that a hanging program is
// killed; tests/agent/agent_program_test.cpp each fault's error, timeouts included.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/pipeline/rl_run.h"
#include "support/oracles.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

std::string agent_command(const std::string& mode, const std::string& dir) {
  return testing::python() + " " + ASPEN_SOURCE_DIR + "/tests/pipeline/data/byo_agent.py " +
         mode + " " + dir;
}

TrainConfig agent_run(const std::string& command, const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {
      "rollout.agent.command=" + command, "rollout.agent.max_concurrent=4",
      "rollout.agent.timeout_s=20",       "rollout.environment.chat_template=qwen3",
      "train.sft_steps=0",                "train.iterations=2",
      "rollout.max_tokens=8",             "model.tokenizer_vocab=300",
      "rollout.n=2",                      "rollout.prompts_per_iteration=1",
      "data.eval_size=2"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return testing::tiny_run_config(overrides);
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/aspen_agent_run_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir + "/seen");
  return dir;
}

// The run's RL metrics lines.
std::vector<nlohmann::json> rl_lines(const std::string& run_dir) {
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) {
    auto json = nlohmann::json::parse(line);
    if (json["phase"] == "rl") lines.push_back(std::move(json));
  }
  return lines;
}

TEST(AgentRun, AnOpenAiClientAgentTrainsTwoIterationsInSyncAndAsyncMode) {
  for (const std::string mode : {"sync", "async"}) {
    const std::string dir = fresh_dir(mode);
    const TrainConfig config =
        agent_run(agent_command("two_turns", dir + "/seen"), {"pipeline.mode=" + mode});
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{dir + "/run"});
    const std::vector<nlohmann::json> lines = rl_lines(dir + "/run");
    ASSERT_EQ(lines.size(), 2U) << mode;
    for (const nlohmann::json& line : lines) {
      // Two calls per episode; a call the template renders differently from what the
      // engine saw splits the session, and the trajectory trains on its last segment.
      EXPECT_GT(line.at("turns_mean").get<double>(), 1.0) << mode;
      EXPECT_LE(line.at("turns_mean").get<double>(), 2.0) << mode;
      EXPECT_EQ(line.at("tool_calls_mean").get<double>(), 0.0) << mode << ": it offers no tools";
      EXPECT_TRUE(line.at("bubbles").contains("tool_wait")) << mode;
      EXPECT_EQ(line.at("trajectory_end_environment_error").get<int64_t>(), 0) << mode;
      EXPECT_GE(line.at("agent_calls").get<int64_t>(), 4) << mode << ": 2 per trajectory";
      EXPECT_EQ(line.at("agent_crashes").get<int64_t>(), 0) << mode;
    }
    // Every program that ran wrote what its client saw (the metrics line counts those
    // that had ended when it was written).
    int64_t episodes = 0;
    for (const auto& entry : fs::directory_iterator(dir + "/seen")) episodes += entry.is_regular_file();
    EXPECT_GE(episodes, lines.back().at("agent_episodes").get<int64_t>()) << mode;
    EXPECT_GE(episodes, 4) << mode << ": 2 iterations of one group of 2";
  }
}

TEST(AgentRun, FaultyAgentsFailTheirOwnTrajectoriesWhichTrainWithRewardZero) {
  const std::string dir = fresh_dir("mixed");
  const TrainConfig config = agent_run(agent_command("mixed", dir + "/seen"),
                                       {"rollout.environment.on_error=zero"});
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{dir + "/run"});
  const std::vector<nlohmann::json> lines = rl_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 2U);
  int64_t failed = 0, done = 0;
  for (const nlohmann::json& line : lines) {
    failed += line.at("trajectory_end_environment_error").get<int64_t>();
    done += line.at("trajectory_end_done").get<int64_t>();
  }
  EXPECT_GT(done, 0) << "the well-behaved episodes";
  const nlohmann::json& last = lines.back();
  int64_t faults = 0;
  for (const char* metric : {"agent_timeouts", "agent_crashes", "agent_garbage", "agent_oversized",
                             "agent_no_calls"}) {
    faults += last.at(metric).get<int64_t>();
  }
  EXPECT_GT(faults, 0) << last.dump();
  EXPECT_GE(faults, failed) << "every failed trajectory trained was an agent's fault";
}

TEST(AgentRun, ABrokenAgentEndsTheRunWithItsErrorInsteadOfHanging) {
  const std::string dir = fresh_dir("broken");
  for (const std::string on_error : {"drop", "zero"}) {
    TrainConfig config = agent_run(agent_command("broken", dir + "/seen"),
                                   {"rollout.environment.on_error=" + on_error});
    config.train.iterations = 50;  // more claims than the bound: it must end on its own
    RlSetup setup = build_rl_setup(config);
    try {
      run_rl(config, setup, RunOptions{dir + "/run_" + on_error});
      ADD_FAILURE() << on_error << ": a broken agent trained";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rollout.agent.command"), std::string::npos) << what;
      EXPECT_NE(what.find("not a reward"), std::string::npos) << what;
    }
  }
}

TEST(AgentRun, TheConfigRefusesWhatAnAgentRunCannotDoNamingTheKey) {
  auto refused = [](const std::vector<std::string>& overrides, const std::string& key) {
    try {
      agent_run("true", overrides);
      ADD_FAILURE() << "accepted: " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  refused({"rollout.environment.kind=tools"}, "rollout.agent.command");
  refused({"pipeline.mode=async", "pipeline.partial_rollout=true"}, "pipeline.partial_rollout");
  refused({"data.chat_template=true"}, "data.chat_template");
  refused({"rollout.agent.max_concurrent=0"}, "rollout.agent.max_concurrent");
  refused({"rollout.agent.timeout_s=0"}, "rollout.agent.timeout_s");
  refused({"rollout.agent.on_prefix_break=maybe"}, "rollout.agent.on_prefix_break");
  refused({"rollout.environment.chat_template="}, "rollout.environment.chat_template");
  EXPECT_TRUE(agent_run("true", {}).rollout.multi_turn());
}

}  // namespace
}  // namespace aspen::pipeline
