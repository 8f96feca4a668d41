// Multi-turn runs end to end (rollout.environment, issue #35): the warm-up's
// demonstrations are the contexts the rollout builds, token for token; a tiny run with
// the calculator tool, warmed up on demonstrations that always call it, trains on
// trajectories of more than one turn in sync and async mode and reports turns, tool
// calls and the tool_wait bubble; the config refuses what trajectories cannot do.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/agent/calculator_tool.h"
#include "aspen/agent/tools_environment.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/trajectory_demonstrations.h"
#include "aspen/pipeline/trajectory_loop.h"
#include "support/oracles.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

using nlohmann::ordered_json;

TrajectoryEnvironments calculator_environments() {
  auto tools = std::make_shared<ToolBox>();
  tools->add(std::make_shared<CalculatorTool>());
  std::shared_ptr<const ToolBox> box = tools;
  AnswerVerifier verifier = [](const std::string& answer, const ordered_json& row) {
    return answer == row.at("answer").dump() ? 1.0 : 0.0;
  };
  TrajectoryEnvironments envs;
  envs.make_environment = [box, verifier] {
    return std::make_unique<ToolsEnvironment>(box, verifier, ToolsEnvironmentOptions{});
  };
  envs.data_row = [](const TaskExample& example) {
    return ordered_json{{"prompt", example.prompt_text},
                        {"answer", ordered_json::parse(example.ground_truth.dump())},
                        {"id", example.id}};
  };
  envs.chat_template = std::make_shared<const ChatTemplate>(ChatTemplate::builtin("qwen3"));
  return envs;
}

TEST(TrajectoryDemonstrations, SftPromptsAreTheContextsTheRolloutBuildsTokenForToken) {
  const auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_file(testing::qwen3_tokenizer_dir() + "/tokenizer.json"));
  const TrajectoryEnvironments envs = calculator_environments();
  const TaskExample example{"arithmetic:12345*678", "12345*678=", 8369910, "math"};
  const std::vector<std::string> turns = {
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"12345*678\"}}\n"
      "</tool_call>",
      "8369910"};
  const auto segments = demonstration_segments(envs, example, turns);
  ASSERT_EQ(segments.size(), 4U);  // prompt, call, observation, answer
  EXPECT_NE(segments[2].text.find("<tool_response>\n8369910\n</tool_response>"), std::string::npos);
  const std::vector<SftExample> sft = demonstration_sft_examples(*tokenizer, segments);
  ASSERT_EQ(sft.size(), 2U);

  // The rollout's loop, fed the same turns as engine output, asks for the same contexts.
  TrajectoryLoop loop(TrajectoryLoopOptions{}, envs.make_environment, tokenizer, *envs.chat_template);
  loop.start({1, 1, 0}, envs.data_row(example));
  for (size_t t = 0; t < sft.size(); ++t) {
    std::vector<TrajectoryLoop::NextTurn> next;
    std::vector<TrajectoryLoop::Finished> finished;
    while (next.empty() && finished.empty()) {
      loop.wait_ready(0.05);
      loop.poll(next, finished);
    }
    ASSERT_EQ(next.size(), 1U) << "turn " << t;
    EXPECT_EQ(std::vector<int64_t>(next[0].context.begin(), next[0].context.end()), sft[t].prompt)
        << "turn " << t;
    Completion turn;
    turn.token_ids.assign(sft[t].answer.begin(), sft[t].answer.end());
    turn.logprobs.assign(turn.token_ids.size(), -1.0F);
    turn.policy_versions.assign(turn.token_ids.size(), 0);
    loop.turn_finished({1, 1, 0}, turn);
  }
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  while (finished.empty()) {
    loop.wait_ready(0.05);
    loop.poll(next, finished);
  }
  EXPECT_EQ(finished[0].trajectory.reward, 1.0);
  EXPECT_EQ(finished[0].trajectory.tool_calls, 1);
}

// The tiny run with the calculator, warmed up on demonstrations that always call it.
TrainConfig calculator_run(const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {
      "data.task_options={\"min_digits\": 3, \"max_digits\": 3, \"ops\": [\"*\"], "
      "\"teacher_tool_rate\": 1.0}",
      "model.tokenizer_vocab=400",
      "rollout.environment.kind=tools",
      "rollout.environment.chat_template=qwen3",
      "rollout.environment.max_turns=3",
      "rollout.environment.max_trajectory_tokens=96",
      "rollout.max_tokens=32",
      "train.sft_steps=120",
      "train.sft_batch_size=16",
      "train.iterations=2",
      "model.hidden_size=64",
      "model.head_dim=16",
      "model.intermediate_size=128",
      "data.eval_size=2"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return testing::tiny_run_config(overrides);
}

void expect_multi_turn_metrics(const std::string& dir) {
  std::ifstream metrics(dir + "/metrics.jsonl");
  int rl_lines = 0;
  double turns = 0, calls = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto json = nlohmann::json::parse(line);
    if (json["phase"] != "rl") continue;
    ++rl_lines;
    turns = std::max(turns, json.at("turns_mean").get<double>());
    calls = std::max(calls, json.at("tool_calls_mean").get<double>());
    EXPECT_TRUE(json.at("bubbles").contains("tool_wait"));
    EXPECT_TRUE(json.contains("trajectory_end_environment_error"));
  }
  EXPECT_EQ(rl_lines, 2);
  EXPECT_GT(turns, 1.0) << "the warmed-up model calls the tool and answers after its result";
  EXPECT_GT(calls, 0.0);
}

// Async (the walkthrough of docs/agents.md runs the same task in sync mode,
// tests/cli/walkthrough_test.cpp).
TEST(TrajectoryRun, ACalculatorRunTrainsOnMultiTurnTrajectoriesInAsyncMode) {
  for (const std::string mode : {"async"}) {
    const TrainConfig config = calculator_run({"pipeline.mode=" + mode});
    RlSetup setup = build_rl_setup(config);
    const std::string dir = ::testing::TempDir() + "/aspen_trajectory_" + mode;
    std::filesystem::remove_all(dir);
    const nlohmann::json summary = run_rl(config, setup, RunOptions{dir});
    EXPECT_TRUE(summary.contains("eval_tool_calls_after_rl")) << mode;
    expect_multi_turn_metrics(dir);
  }
}

// A command environment (Python) that answers every reset and ends each episode after
// one turn; when FLAKY it crashes (exits) at the step of the trajectories whose prompt's
// first digit is odd; when BROKEN it answers every reset with garbage.
std::string environment_script(const std::string& dir, const std::string& mode) {
  const std::string path = dir + "/env_" + mode + ".py";
  std::ofstream(path) << R"(import json, sys
mode = sys.argv[1]
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "reset":
        prompt = request["row"]["prompt"]
        if mode == "broken":
            print("not json", flush=True)
            continue
        odd = int(prompt[0]) % 2 == 1
        print(json.dumps({"messages": [{"role": "user", "content": prompt}]}), flush=True)
    else:
        if mode == "flaky" and odd:
            sys.exit(3)
        print(json.dumps({"done": True, "reward": 1.0}), flush=True)
)";
  return "python3 " + path + " " + mode;
}

TrainConfig command_run(const std::string& command, const std::string& on_error) {
  return testing::tiny_run_config(
      {"rollout.environment.kind=command", "rollout.environment.command=" + command,
       "rollout.environment.on_error=" + on_error, "rollout.environment.chat_template=qwen3",
       "rollout.environment.timeout_s=5", "train.sft_steps=0", "train.iterations=2",
       "rollout.max_tokens=8", "model.tokenizer_vocab=300", "data.eval_size=2"});
}

TEST(TrajectoryRun, AFlakyEnvironmentFailsItsTrajectoriesWhichTrainWithRewardZero) {
  const std::string dir = ::testing::TempDir() + "/aspen_flaky_env";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const TrainConfig config = command_run(environment_script(dir, "flaky"), "zero");
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{dir + "/run"});
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int64_t failed = 0, done = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto json = nlohmann::json::parse(line);
    if (json["phase"] != "rl") continue;
    failed += json.at("trajectory_end_environment_error").get<int64_t>();
    done += json.at("trajectory_end_done").get<int64_t>();
  }
  EXPECT_GT(failed, 0) << "the prompts with an odd first digit";
  EXPECT_GT(done, 0) << "the others";
}

TEST(TrajectoryRun, ABrokenEnvironmentEndsTheRunWithItsErrorInsteadOfHanging) {
  const std::string dir = ::testing::TempDir() + "/aspen_broken_env";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const std::string on_error : {"drop", "zero"}) {
    TrainConfig config = command_run(environment_script(dir, "broken"), on_error);
    config.train.iterations = 50;  // more claims than the bound: it must end on its own
    RlSetup setup = build_rl_setup(config);
    try {
      run_rl(config, setup, RunOptions{dir + "/run_" + on_error});
      ADD_FAILURE() << on_error << ": a broken environment trained";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rollout.environment (command)"), std::string::npos) << what;
      EXPECT_NE(what.find("not json"), std::string::npos) << what;
    }
  }
}

TEST(TrajectoryRun, TheConfigRefusesWhatTrajectoriesCannotDo) {
  auto refused = [](const std::vector<std::string>& overrides, const std::string& key) {
    try {
      calculator_run(overrides);
      ADD_FAILURE() << "accepted: " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  refused({"pipeline.mode=async", "pipeline.partial_rollout=true"}, "pipeline.partial_rollout");
  refused({"rollout.environment.chat_template="}, "rollout.environment.chat_template");
  refused({"rollout.environment.max_trajectory_tokens=8"}, "max_trajectory_tokens");
  refused({"rollout.environment.tools=[\"shell\"]"}, "rollout.environment.tools");
  refused({"rollout.environment.kind=command"}, "rollout.environment.command");
}

}  // namespace
}  // namespace aspen::pipeline
