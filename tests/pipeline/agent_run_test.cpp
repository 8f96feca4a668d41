// Bring-your-own-agent runs end to end (rollout.agent.command, issue #35 item 5): tiny
// runs whose trajectories are runs of an agent program written with the official
// `openai` client (tests/pipeline/data/byo_agent.py) against the rollout instance's own
// endpoint train for two iterations in sync and async mode and report turns, tool calls
// and the agent's counters; a program that crashes mid-episode fails its own trajectory,
// which trains with reward 0; under on_error `drop` a program that never calls takes
// only its own group out of the dock; a broken program ends the run with its error
// instead of hanging; the config refuses what an agent run cannot do, naming the key.
// agent_loop_test.cpp checks that the dock rows hold exactly the tokens the client saw,
// the faults of programs that never call (garbage, silent, 10 MB, crash) and that a
// hanging program is killed; agent_loop_faults_test.cpp a hanging program's timeout and
// late and wrong-session calls among good programs; tests/agent/agent_program_test.cpp and
// tests/serve/agent_endpoint_test.cpp each fault's error (timeouts, late and
// wrong-session calls included).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/trajectory_environments.h"
#include "aspen/pipeline/trajectory_eval.h"
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

// The first program of each run crashes after its first call: its trajectory trains with
// reward 0 (rollout.environment.on_error zero, the default) and counts as an error.
void expect_agent_run_trains(const std::string& mode) {
  const std::string dir = fresh_dir(mode);
  const TrainConfig config =
      agent_run(agent_command("once_crash", dir + "/seen"), {"pipeline.mode=" + mode});
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{dir + "/run"});
  const std::vector<nlohmann::json> lines = rl_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 2U) << mode;
  int64_t failed = 0;
  for (const nlohmann::json& line : lines) {
    // Two calls per episode (one for the crashed one); a call the template renders
    // differently from what the engine saw splits the session, and the trajectory
    // trains on its last segment.
    EXPECT_GE(line.at("turns_mean").get<double>(), 1.0) << mode;
    EXPECT_LE(line.at("turns_mean").get<double>(), 2.0) << mode;
    EXPECT_EQ(line.at("tool_calls_mean").get<double>(), 0.0) << mode << ": it offers no tools";
    EXPECT_TRUE(line.at("bubbles").contains("tool_wait")) << mode;
    EXPECT_GT(line.at("agent_calls").get<int64_t>(), 0) << mode;
    failed += line.at("trajectory_end_environment_error").get<int64_t>();
  }
  EXPECT_LE(failed, 1) << mode << ": only the first program failed";
  if (mode == "sync") EXPECT_EQ(failed, 1) << "the first group is the first batch";
  EXPECT_GT(std::max(lines[0].at("turns_mean").get<double>(),
                     lines[1].at("turns_mean").get<double>()),
            1.0)
      << mode;
  // Every program that called wrote what its client saw (the metrics line counts
  // those that had ended when it was written).
  int64_t episodes = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/seen")) {
    episodes += entry.path().extension() == ".seen";
  }
  EXPECT_GE(episodes, 3) << mode << ": 2 iterations of one group of 2, one crashed";
  EXPECT_GE(episodes + 1, lines.back().at("agent_episodes").get<int64_t>()) << mode;
}

TEST(AgentRun, AnOpenAiClientAgentTrainsTwoIterationsInSyncMode) { expect_agent_run_trains("sync"); }

TEST(AgentRun, AnOpenAiClientAgentTrainsTwoIterationsInAsyncMode) {
  expect_agent_run_trains("async");
}

// A program that never calls has no turn: its group leaves the dock under on_error `drop`
// and `zero` (the default) alike (finish_trajectory_claim), so one policy covers both.
TEST(AgentRun, ABrokenAgentEndsTheRunWithItsErrorInsteadOfHanging) {
  const std::string dir = fresh_dir("broken");
  TrainConfig config = agent_run(agent_command("broken", dir + "/seen"), {});
  config.train.iterations = 50;  // more claims than the bound: it must end on its own
  RlSetup setup = build_rl_setup(config);
  try {
    run_rl(config, setup, RunOptions{dir + "/run"});
    ADD_FAILURE() << "a broken agent trained";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rollout.agent.command"), std::string::npos) << what;
    EXPECT_NE(what.find("not a reward"), std::string::npos) << what;
  }
}

// Under on_error `drop`, the first program never calls (tests/pipeline/data/urllib_agent.py
// once_silent: plain urllib, no `openai` import). Its group leaves the dock and is
// refilled; nothing else is lost: every other episode trains, and the counts add up.
TEST(AgentRun, UnderDropANoCallProgramsGroupLeavesTheDockAndTheOthersAllTrain) {
  const std::string dir = fresh_dir("drop");
  const std::string command = testing::python() + " " + ASPEN_SOURCE_DIR +
                              "/tests/pipeline/data/urllib_agent.py " + dir + "/seen once_silent";
  const TrainConfig config =
      agent_run(command, {"rollout.environment.on_error=drop", "pipeline.mode=sync"});
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{dir + "/run"});
  const std::vector<nlohmann::json> lines = rl_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 2U);
  for (const nlohmann::json& line : lines) {
    EXPECT_EQ(line.at("trained_groups").get<int64_t>(), 1) << line.dump();
    EXPECT_EQ(line.at("trained_rows").get<int64_t>(), 2) << line.dump();
    EXPECT_EQ(line.at("trajectory_end_done").get<int64_t>(), 2) << line.dump();
    EXPECT_EQ(line.at("trajectory_end_environment_error").get<int64_t>(), 0) << line.dump();
    EXPECT_EQ(line.at("turns_mean").get<double>(), 1.0) << line.dump();
  }
  const nlohmann::json& last = lines.back();
  EXPECT_EQ(last.at("agent_no_calls").get<int64_t>(), 1);
  EXPECT_EQ(last.at("environment_errors").get<int64_t>(), 1);
  // Sync mode: the dropped group (2 episodes, one silent) and the two trained groups
  // (2 episodes each, one call each); no other episode ran, none failed otherwise. The
  // programs' own record (urllib_agent.py's files) says the same; a program the next
  // claim started as the run ended was told so (503) and trained nothing.
  int64_t answered = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/seen")) {
    if (entry.path().extension() != ".calls") continue;
    std::ifstream calls(entry.path());
    std::string line;
    ASSERT_TRUE(std::getline(calls, line));
    const nlohmann::json call = nlohmann::json::parse(line);
    if (call.at("status").get<int>() == 200) {
      ++answered;
    } else {
      EXPECT_EQ(call.at("status").get<int>(), 503) << line;
      EXPECT_NE(line.find("the run is over"), std::string::npos) << line;
    }
    EXPECT_FALSE(std::getline(calls, line)) << "one call per program";
  }
  EXPECT_EQ(answered, 5);
  EXPECT_TRUE(fs::exists(dir + "/seen/silenced"));
  EXPECT_EQ(last.at("agent_episodes").get<int64_t>(), 6);
  EXPECT_EQ(last.at("agent_calls").get<int64_t>(), 5);
  for (const char* metric : {"agent_timeouts", "agent_crashes", "agent_garbage",
                             "agent_oversized", "agent_cancelled", "agent_late_calls",
                             "agent_unknown_session_calls"}) {
    EXPECT_EQ(last.at(metric).get<int64_t>(), 0) << metric;
  }
}

// `aspen eval` of an agent run: each sample is one run of the program against an
// endpoint the evaluation's engine answers, scored by the reward the program prints.
TEST(AgentRun, EvaluationPlaysTheAgentProgramOncePerSampleAndScoresItsReward) {
  const std::string dir = fresh_dir("eval");
  const TrainConfig config = agent_run(agent_command("two_turns", dir + "/seen"), {});
  RlSetup setup = build_rl_setup(config);
  const auto trajectories = make_rollout_trajectories(config, setup);
  ASSERT_TRUE(trajectories && trajectories->agent);
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.max_tokens = 8;
  const TrajectoryEvalResult result =
      evaluate_trajectories(setup, *trajectories, setup.eval_examples, greedy, /*n=*/2);
  ASSERT_EQ(result.pass.examples, 2);
  EXPECT_EQ(result.environment_error_fraction, 0.0);
  // Two calls per episode; a call the template renders differently splits the session
  // and the trajectory keeps its last segment.
  EXPECT_GE(result.turns_mean, 1.0);
  EXPECT_LE(result.turns_mean, 2.0);
  EXPECT_GE(result.pass.mean_score, 0.0);
  EXPECT_LE(result.pass.mean_score, 1.0);
  int64_t episodes = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/seen")) {
    episodes += entry.path().extension() == ".seen";
  }
  EXPECT_EQ(episodes, 4) << "2 examples x 2 samples, one program each";
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

// The run configuration docs/agents.md shows reads as written.
TEST(AgentRun, TheDocumentedAgentConfigIsAValidRunConfig) {
  std::ifstream docs(std::string(ASPEN_SOURCE_DIR) + "/docs/agents.md");
  const std::string text((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  const size_t section = text.find("## Bring your own agent");
  const size_t begin = text.find("```yaml\n", section);
  ASSERT_NE(begin, std::string::npos) << "docs/agents.md lost its agent run config";
  const size_t code = begin + 8;
  Config yaml = Config::parse(text.substr(code, text.find("```", code) - code), "docs/agents.md");
  const TrainConfig config = parse_train_config(yaml);
  EXPECT_EQ(config.rollout.agent.command, "python my_agent.py");
  EXPECT_EQ(config.rollout.agent.max_concurrent, 8);
  EXPECT_TRUE(config.rollout.multi_turn());
}

}  // namespace
}  // namespace aspen::pipeline
