// AgentLoop (pipeline/agent_loop.h) with a real engine, against agent programs that
// misbehave after or instead of a good call (tests/pipeline/data/urllib_agent.py: plain
// urllib, so each program starts in tens of milliseconds): a program that hangs after
// its call, one calling with a made-up session id, one calling after it printed its
// reward. Each is one trajectory among good ones, started together as a claim's rows
// are: the fault ends (or leaves) only its own trajectory, with its one-line error and
// its metric; the others end as they would alone; nothing hangs.
// agent_loop_test.cpp covers the programs that fail without calling (garbage, silent,
// 10 MB, crash); agent_run_test.cpp the faults inside a training run.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "agent_loop_driver.h"
#include "support/oracles.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;
using agent_loop_testing::agent_dir;
using agent_loop_testing::drive;
using agent_loop_testing::qwen3_tokenizer;
using agent_loop_testing::tiny_engine;
using nlohmann::json;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

AgentLoopOptions urllib_agent(const std::string& dir, double timeout_s) {
  AgentLoopOptions options;
  options.command = testing::python() + " " + ASPEN_SOURCE_DIR +
                    "/tests/pipeline/data/urllib_agent.py " + dir;
  options.timeout_s = timeout_s;
  options.max_concurrent = 4;
  options.max_turn_tokens = 6;
  options.max_model_len = 1024;
  options.limits.max_turns = 4;
  return options;
}

// The loop's trajectories in `dir`'s programs' modes: rows of one claim (group 1),
// sample i in modes[i].
std::vector<TrajectorySource::Finished> run_claim(AgentLoop& loop,
                                                  const std::vector<std::string>& modes) {
  std::unique_ptr<RolloutEngine> engine = tiny_engine();
  for (size_t i = 0; i < modes.size(); ++i) {
    loop.start({1, 1, static_cast<int64_t>(i)}, {{"prompt", "Hi"}, {"mode", modes[i]}});
  }
  std::vector<TrajectorySource::Finished> ended = drive(loop, *engine, modes.size());
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return ended;
}

// What each program was told, per call (urllib_agent.py's .calls files), in any order.
std::vector<std::vector<json>> calls_told(const std::string& dir) {
  std::vector<std::vector<json>> programs;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".calls") continue;
    std::ifstream in(entry.path());
    std::vector<json> calls;
    for (std::string line; std::getline(in, line);) calls.push_back(json::parse(line));
    programs.push_back(std::move(calls));
  }
  return programs;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(AgentLoopFaults, AHangingProgramEndsItsOwnTrajectoryAtTheTimeoutAndTheOthersTrain) {
  // 5 s: the good programs (a Python start and one call) must end well within it on a
  // loaded 2-core machine, where 1 s was too short at load 6 (2.5 s held at load 7.6;
  // CI runs two tests at once beside nothing else, but a slow runner must not flake).
  const std::string dir = agent_dir("timeout");
  AgentLoop loop(urllib_agent(dir, 5.0), qwen3_tokenizer(),
                 ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
  const auto start = Clock::now();
  const auto ended = run_claim(loop, {"one_call", "hang", "one_call"});
  const double took = seconds_since(start);
  ASSERT_EQ(ended.size(), 3U);
  EXPECT_GE(took, 5.0) << "the hanging program ran its whole timeout";
  EXPECT_LT(took, 10.0) << "nothing waited past it";
  for (const TrajectorySource::Finished& done : ended) {
    const Trajectory& t = done.trajectory;
    if (done.key.sample == 1) {
      EXPECT_EQ(t.end, TrajectoryEnd::kEnvironment);
      EXPECT_NE(t.error.find("timed out after 5 s"), std::string::npos) << t.error;
      EXPECT_EQ(t.turns(), 1) << "what it generated is still reported";
    } else {
      EXPECT_EQ(t.end, TrajectoryEnd::kDone) << t.error;
      EXPECT_TRUE(t.has_reward);
      EXPECT_EQ(t.reward, 0.5F);
      EXPECT_EQ(t.turns(), 1);
    }
  }
  const std::map<std::string, int64_t> counters = loop.counters();
  EXPECT_EQ(counters.at("agent_timeouts"), 1);
  EXPECT_EQ(counters.at("agent_episodes"), 3);
  EXPECT_EQ(counters.at("agent_calls"), 3);
  EXPECT_EQ(loop.waiting(), 0);
  fs::remove_all(dir);
}

TEST(AgentLoopFaults, ACallWithAMadeUpSessionIsRefusedAndItsTrajectoryEndsWithNoCalls) {
  const std::string dir = agent_dir("wrong_session");
  AgentLoop loop(urllib_agent(dir, 20), qwen3_tokenizer(),
                 ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
  const auto ended = run_claim(loop, {"one_call", "wrong_session"});
  ASSERT_EQ(ended.size(), 2U);
  EXPECT_EQ(ended[0].trajectory.end, TrajectoryEnd::kDone) << ended[0].trajectory.error;
  EXPECT_EQ(ended[0].trajectory.turns(), 1);
  const Trajectory& wrong = ended[1].trajectory;
  EXPECT_EQ(wrong.end, TrajectoryEnd::kEnvironment);
  EXPECT_EQ(wrong.turns(), 0);
  EXPECT_NE(wrong.error.find("made no call with its session id"), std::string::npos) << wrong.error;
  EXPECT_NE(wrong.error.find("agent_unknown_session_calls"), std::string::npos) << wrong.error;
  // The program was told why (HTTP 403 naming ASPEN_SESSION), the good one got its turn.
  std::vector<int> statuses;
  for (const std::vector<json>& calls : calls_told(dir)) {
    ASSERT_EQ(calls.size(), 1U);
    statuses.push_back(calls[0].at("status").get<int>());
    if (statuses.back() == 403) {
      const std::string body = calls[0].at("body").get<std::string>();
      EXPECT_NE(body.find("unknown session"), std::string::npos) << body;
      EXPECT_NE(body.find("ASPEN_SESSION"), std::string::npos) << body;
    }
  }
  std::sort(statuses.begin(), statuses.end());
  EXPECT_EQ(statuses, (std::vector<int>{200, 403}));
  const std::map<std::string, int64_t> counters = loop.counters();
  EXPECT_EQ(counters.at("agent_unknown_session_calls"), 1);
  EXPECT_EQ(counters.at("agent_no_calls"), 1);
  EXPECT_EQ(counters.at("agent_calls"), 1);
  fs::remove_all(dir);
}

TEST(AgentLoopFaults, ACallAfterTheRewardIsRefusedAndItsTrajectoryTrainsAsPrinted) {
  const std::string dir = agent_dir("late");
  AgentLoop loop(urllib_agent(dir, 20), qwen3_tokenizer(),
                 ChatTemplate::from_config(testing::qwen3_tokenizer_dir()));
  const auto ended = run_claim(loop, {"one_call", "late"});
  ASSERT_EQ(ended.size(), 2U);
  // The late program's trajectory is its one call before the reward, as the good one's.
  for (const TrajectorySource::Finished& done : ended) {
    const Trajectory& t = done.trajectory;
    EXPECT_EQ(t.end, TrajectoryEnd::kDone) << "sample " << done.key.sample << ": " << t.error;
    EXPECT_TRUE(t.has_reward);
    EXPECT_EQ(t.reward, 0.5F);
    EXPECT_EQ(t.turns(), 1) << "sample " << done.key.sample;
  }
  EXPECT_EQ(ended[0].trajectory.prompt, ended[1].trajectory.prompt);
  // The late call was answered 409 saying why; the first calls were answered.
  int late = 0;
  for (const std::vector<json>& calls : calls_told(dir)) {
    ASSERT_GE(calls.size(), 1U);
    EXPECT_EQ(calls[0].at("status").get<int>(), 200);
    if (calls.size() == 1) continue;
    ++late;
    EXPECT_EQ(calls[1].at("status").get<int>(), 409);
    const std::string body = calls[1].at("body").get<std::string>();
    EXPECT_NE(body.find("already printed its reward"), std::string::npos) << body;
  }
  EXPECT_EQ(late, 1);
  const std::map<std::string, int64_t> counters = loop.counters();
  EXPECT_EQ(counters.at("agent_late_calls"), 1);
  EXPECT_EQ(counters.at("agent_calls"), 2);
  EXPECT_EQ(counters.at("agent_episodes"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aspen::pipeline
