// AgentLoop (pipeline/agent_loop.h) with a real engine: bring-your-own-agent programs
// written with the official `openai` client (tests/pipeline/data/byo_agent.py) call the
// loop's endpoint while this test steps a RolloutEngine exactly as a rollout worker's
// thread does (poll, add the next turns, step, hand the finished turns back). The dock
// row of each trajectory (trajectory_columns) holds exactly the tokens and log-probs
// the client was shown, with the user message's tokens between the turns masked out;
// faulty programs end their own trajectory with an error and counted metrics, never
// the loop; destroying the loop kills the programs still running.
#include "aspen/pipeline/agent_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent_loop_driver.h"
#include "aspen/pipeline/rl_rows.h"
#include "support/oracles.h"
#include "support/tiny_model_configs.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using agent_loop_testing::agent_dir;
using agent_loop_testing::drive;
using agent_loop_testing::qwen3_tokenizer;
using agent_loop_testing::tiny_engine;

AgentLoopOptions agent_options(const std::string& mode, const std::string& dir) {
  AgentLoopOptions options;
  options.command = testing::python() + " " + ASPEN_SOURCE_DIR +
                    "/tests/pipeline/data/byo_agent.py " + mode + " " + dir;
  options.timeout_s = 20;
  options.max_concurrent = 4;
  options.max_turn_tokens = 6;
  options.max_model_len = 1024;
  options.limits.max_turns = 4;
  return options;
}

ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return ordered_json::parse(text.str());
}

TEST(AgentLoop, TheDockRowsHoldExactlyTheTokensTheOpenAiClientSaw) {
  const std::string dir = agent_dir("seen");
  std::unique_ptr<RolloutEngine> engine = tiny_engine();
  AgentLoop loop(agent_options("two_turns", dir), qwen3_tokenizer(),
                 ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
  EXPECT_EQ(loop.base_url().rfind("http://127.0.0.1:", 0), 0U) << loop.base_url();
  for (int64_t sample = 0; sample < 2; ++sample) {
    loop.start({1, 5, sample}, {{"prompt", "What is 2 + " + std::to_string(sample) + "?"}});
  }
  std::vector<TrajectorySource::Finished> ended = drive(loop, *engine, 2);
  std::vector<Trajectory> trajectories;
  const Tokenizer& tokenizer = *qwen3_tokenizer();
  for (const auto& done : ended) trajectories.push_back(done.trajectory);
  const std::vector<ColumnData> columns = trajectory_columns(trajectories);
  const ColumnData& response = find_column(columns, rl_columns::kResponse);
  const ColumnData& mask = find_column(columns, rl_columns::kLossMask);
  const ColumnData& logprobs = find_column(columns, rl_columns::kRolloutLogprobs);
  // Each program wrote what its client saw, by session: the files, in any order.
  std::vector<ordered_json> seen;
  for (const auto& entry : fs::directory_iterator(dir)) seen.push_back(read_json(entry.path()));
  ASSERT_EQ(seen.size(), 2U);
  for (size_t row = 0; row < trajectories.size(); ++row) {
    const Trajectory& t = trajectories[row];
    ASSERT_EQ(t.end, TrajectoryEnd::kDone) << t.error;
    EXPECT_TRUE(t.has_reward);
    ASSERT_EQ(t.turns(), 2);
    // The row's trained tokens (mask 1), as token texts, in order, and their log-probs.
    const torch::Tensor tokens = response.values[row].to(torch::kInt64);
    const torch::Tensor masked = mask.values[row].to(torch::kFloat);
    const torch::Tensor rollout = logprobs.values[row].to(torch::kFloat);
    ASSERT_EQ(tokens.numel(), static_cast<int64_t>(t.response.size()));
    std::vector<std::string> trained;
    std::vector<float> trained_logprobs;
    int64_t observation = 0;
    for (int64_t i = 0; i < tokens.numel(); ++i) {
      if (masked[i].item<float>() == 0.0F) {
        ++observation;
        continue;
      }
      trained.push_back(tokenizer.decode({static_cast<TokenId>(tokens[i].item<int64_t>())}));
      trained_logprobs.push_back(rollout[i].item<float>());
    }
    EXPECT_GT(observation, 0) << "the user message between the turns";
    // The client's view of the same episode: the file whose tokens match.
    bool matched = false;
    for (const ordered_json& episode : seen) {
      std::vector<std::string> shown;
      std::vector<float> shown_logprobs;
      for (const auto& turn : episode["seen"]) {
        for (const auto& token : turn["tokens"]) shown.push_back(token.get<std::string>());
        for (const auto& lp : turn["logprobs"]) shown_logprobs.push_back(lp.get<float>());
      }
      if (shown != trained) continue;
      matched = true;
      for (size_t i = 0; i < shown.size(); ++i) {
        EXPECT_NEAR(trained_logprobs[i], shown_logprobs[i], 1e-5) << "token " << i;
      }
    }
    EXPECT_TRUE(matched) << "row " << row << ": no client saw these tokens";
  }
  const std::map<std::string, int64_t> counters = loop.counters();
  EXPECT_EQ(counters.at("agent_calls"), 4);
  EXPECT_EQ(counters.at("agent_episodes"), 2);
  EXPECT_EQ(loop.waiting(), 0);
  fs::remove_all(dir);
}

// Programs that fail at once (no `openai` import: fast); the faults that need a call
// first are agent_loop_faults_test.cpp's (timeout, late and wrong-session calls), the
// runs' (a crash after a call: agent_run_test.cpp) and the endpoint's
// (tests/serve/agent_endpoint_test.cpp).
TEST(AgentLoop, EachFaultyProgramEndsItsOwnTrajectoryWithItsErrorAndAMetric) {
  const std::string dir = agent_dir("faults");
  std::unique_ptr<RolloutEngine> engine = tiny_engine();
  AgentLoop loop(agent_options("two_turns", dir), qwen3_tokenizer(),
                 ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"broken", "not a reward"},
      {"silent", "made no call with its session id"},
      {"flood_now", "bytes on stdout"},
      {"crash_now", "exited with status 3"}};
  for (size_t i = 0; i < faults.size(); ++i) {
    loop.start({1, 1, static_cast<int64_t>(i)}, {{"prompt", "Hi"}, {"mode", faults[i].first}});
  }
  const std::vector<TrajectorySource::Finished> ended = drive(loop, *engine, faults.size());
  ASSERT_EQ(ended.size(), faults.size());
  for (const TrajectorySource::Finished& done : ended) {
    const std::string& expected = faults.at(static_cast<size_t>(done.key.sample)).second;
    EXPECT_EQ(done.trajectory.end, TrajectoryEnd::kEnvironment) << expected;
    EXPECT_EQ(done.trajectory.turns(), 0) << expected;
    EXPECT_NE(done.trajectory.error.find(expected), std::string::npos) << done.trajectory.error;
  }
  const std::map<std::string, int64_t> counters = loop.counters();
  for (const char* metric : {"agent_garbage", "agent_no_calls", "agent_oversized", "agent_crashes"}) {
    EXPECT_EQ(counters.at(metric), 1) << metric;
  }
  EXPECT_EQ(loop.waiting(), 0);
  fs::remove_all(dir);
}

TEST(AgentLoop, DestroyingTheLoopKillsTheProgramsStillRunning) {
  const std::string dir = agent_dir("hang");
  AgentLoopOptions options = agent_options("silent_hang", dir);
  options.command = "sleep 60";
  const auto start = Clock::now();
  {
    AgentLoop loop(options, qwen3_tokenizer(), ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
    loop.start({1, 1, 0}, {{"prompt", "Hi"}});
    loop.wait_ready(0.2);
    EXPECT_EQ(loop.waiting(), 1);
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aspen::pipeline
