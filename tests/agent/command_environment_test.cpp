// The command environment (agent/command_environment.h) against small Python scripts:
// an episode over the JSON-lines protocol, and each fault a script can commit (crash,
// hang, garbage, 10 MB of output, a reply of the wrong shape, an extra line) as a
// per-trajectory error, after which a fresh process serves the next episode.
#include "aspen/agent/command_environment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// A guessing game: the row's "target" is to be said; wrong guesses get a hint as a user
// message and a turn penalty, three wrong ones end the episode with reward 0. The
// script's misbehaviour on step is chosen by its argument.
// clang-format off
const char* kEnvironment = R"PY(import json, sys, time
mode = sys.argv[1]
episodes = {}
for line in sys.stdin:
    request = json.loads(line)
    episode = request["episode"]
    if request["op"] == "reset":
        episodes[episode] = {"target": request["row"]["target"], "tries": 0}
        greeting = {"role": "user", "content": "Guess my number (" + episode + ")"}
        hint = {"type": "function", "function": {"name": "hint"}}
        print(json.dumps({"messages": [greeting], "tools": [hint]}))
        continue
    if mode == "crash":
        sys.exit(3)
    if mode == "hang":
        time.sleep(60)
    if mode == "garbage":
        print("Traceback (most recent call last): oops")
        continue
    if mode == "big":
        print("x" * (10 << 20))
        continue
    if mode == "shape":
        print(json.dumps({"observations": "no", "done": False}))
        continue
    if mode == "two_lines":
        print(json.dumps({"done": True, "reward": 1}))
        print(json.dumps({"done": True, "reward": 1}))
        continue
    state = episodes[episode]
    state["tries"] += 1
    if request["turn"].strip() == str(state["target"]):
        print(json.dumps({"done": True, "reward": 1.0}))
    elif state["tries"] >= 3:
        print(json.dumps({"done": True, "reward": 0, "turn_reward": -0.1}))
    else:
        hint = "higher" if int(request["turn"]) < state["target"] else "lower"
        print(json.dumps({"observations": [{"role": "user", "content": hint}],
                          "done": False, "turn_reward": -0.1}))
)PY";
// clang-format on

class CommandEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("aspen_command_env_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "env.py") << kEnvironment;
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandEnvironment environment(const std::string& mode, double timeout_s = 30) {
    CommandEnvironmentOptions options;
    options.command = std::string(ASPEN_PYTHON) + " -u " + (dir_ / "env.py").string() + " " + mode;
    options.timeout_s = timeout_s;
    return CommandEnvironment(options);
  }

  // Resets, then sends one step; expects the step to fail with `fault`, and a next
  // episode to start on a process of its own (`restarted`) or the same one.
  void expect_fault(CommandEnvironment& env, EnvironmentFault fault, const std::string& says,
                    bool restarted) {
    ASSERT_FALSE(env.reset({{"target", 7}}).error);
    const StepResult result = env.step("7");
    EXPECT_TRUE(result.done);
    EXPECT_FALSE(result.reward);
    ASSERT_TRUE(result.error);
    EXPECT_EQ(environment_fault_name(result.error->fault), environment_fault_name(fault));
    EXPECT_NE(result.error->message.find("command environment `"), std::string::npos);
    EXPECT_NE(result.error->message.find(says), std::string::npos) << result.error->message;
    // The episode is over either way; the next one starts (restarting the process if
    // it was killed).
    EXPECT_EQ(env.step("7").error->fault, EnvironmentFault::kRefused);
    EXPECT_FALSE(env.reset({{"target", 7}}).error);
    EXPECT_EQ(env.processes_started(), restarted ? 2 : 1);
  }

  fs::path dir_;
};

TEST_F(CommandEnvironmentTest, PlaysEpisodesOverJsonLines) {
  CommandEnvironment env = environment("good");
  const ResetResult start = env.reset({{"target", 7}, {"id", "q1"}});
  ASSERT_FALSE(start.error) << start.error->message;
  ASSERT_EQ(start.messages.size(), 1u);
  EXPECT_EQ(start.messages[0].role, "user");
  const std::string first_episode = start.messages[0].content;
  EXPECT_EQ(first_episode.rfind("Guess my number (", 0), 0u);
  ASSERT_EQ(start.tools.size(), 1u);
  EXPECT_EQ(start.tools[0]["function"]["name"], "hint");

  const StepResult low = env.step("3");
  EXPECT_FALSE(low.done);
  EXPECT_FALSE(low.error);
  ASSERT_EQ(low.observations.size(), 1u);
  EXPECT_EQ(low.observations[0].role, "user");
  EXPECT_EQ(low.observations[0].content, "higher");
  EXPECT_EQ(low.turn_reward, -0.1);
  EXPECT_FALSE(low.reward);
  EXPECT_EQ(low.metrics.observation_bytes, 6u);
  const StepResult hit = env.step("7");
  EXPECT_TRUE(hit.done);
  EXPECT_EQ(hit.reward, 1.0);
  EXPECT_TRUE(hit.observations.empty());

  // A second episode on the same process, with an id of its own; three misses end it.
  const ResetResult again = env.reset({{"target", 5}});
  ASSERT_FALSE(again.error);
  EXPECT_NE(again.messages[0].content, first_episode);
  EXPECT_EQ(env.step("9").observations[0].content, "lower");
  EXPECT_FALSE(env.step("1").done);
  const StepResult last = env.step("2");
  EXPECT_TRUE(last.done);
  EXPECT_EQ(last.reward, 0.0);
  EXPECT_EQ(env.processes_started(), 1);
}

TEST_F(CommandEnvironmentTest, CrashEndsTheTrajectoryAndTheNextEpisodeRestarts) {
  CommandEnvironment env = environment("crash");
  expect_fault(env, EnvironmentFault::kCrash, "exited", true);
}

TEST_F(CommandEnvironmentTest, HangIsKilledAtTheTimeout) {
  CommandEnvironment env = environment("hang", 0.3);
  const auto start = std::chrono::steady_clock::now();
  expect_fault(env, EnvironmentFault::kTimeout, "before the timeout", true);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST_F(CommandEnvironmentTest, GarbageIsQuoted) {
  CommandEnvironment env = environment("garbage");
  expect_fault(env, EnvironmentFault::kGarbage,
               "reply is not JSON (malformed JSON: [json.exception.parse_error.101]", false);
  CommandEnvironment shape = environment("shape");
  expect_fault(shape, EnvironmentFault::kGarbage,
               "step reply observations: chat messages must be an array", false);
  CommandEnvironment two_lines = environment("two_lines");
  expect_fault(two_lines, EnvironmentFault::kGarbage, "answers no request", true);
}

TEST_F(CommandEnvironmentTest, TenMegabytesOfOutputStopAtTheCap) {
  CommandEnvironment env = environment("big");
  expect_fault(env, EnvironmentFault::kOversized, "longer than 1048576 bytes", true);
}

// The Python environment docs/agents.md shows, run as written there.
TEST_F(CommandEnvironmentTest, DocumentedExamplePlays) {
  std::ifstream docs(std::string(ASPEN_SOURCE_DIR) + "/docs/agents.md");
  const std::string text((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("```python\nimport json, sys\ngames = {}");
  ASSERT_NE(begin, std::string::npos) << "docs/agents.md lost its environment example";
  const size_t code = text.find('\n', begin) + 1;
  std::ofstream(dir_ / "guess.py") << text.substr(code, text.find("```", code) - code);
  CommandEnvironmentOptions options;
  options.command = std::string(ASPEN_PYTHON) + " " + (dir_ / "guess.py").string();
  CommandEnvironment env(options);
  const ResetResult start = env.reset({{"target", 7}});
  ASSERT_FALSE(start.error) << start.error->message;
  EXPECT_EQ(start.messages[0].content, "Guess my number.");
  EXPECT_EQ(env.step("3").observations.at(0).content, "higher");
  EXPECT_EQ(env.step("9").observations.at(0).content, "lower");
  const StepResult hit = env.step("7");
  EXPECT_FALSE(hit.error);
  EXPECT_EQ(hit.reward, 1.0);
}

TEST_F(CommandEnvironmentTest, RefusesBadOptions) {
  EXPECT_THROW(CommandEnvironment(CommandEnvironmentOptions{}), Error);
  EXPECT_THROW(environment("good", 0), Error);
}

}  // namespace
}  // namespace aspen::agent
