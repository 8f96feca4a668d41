// A reward script as a child process (reward/command_reward.h): JSON lines in and out,
// batches in order, restarts after a crash, timeouts and malformed replies as errors
// naming the command. The scripts are real Python, as a user writes them.
#include "aspen/reward/command_reward.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "aspen/reward/verifier_registry.h"
#include "aspen/reward/weighted_reward.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

namespace fs = std::filesystem;

class CommandRewardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("aspen_command_reward_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `body` as a Python script and returns the command that runs it.
  std::string script(const std::string& body) {
    const fs::path path = dir_ / "reward.py";
    std::ofstream(path) << body;
    return std::string(ASPEN_PYTHON) + " -u " + path.string();
  }

  CommandReward reward(const std::string& command, double timeout_s = 30, int restarts = 2) {
    return CommandReward(CommandRewardOptions::from_json(
        {{"command", command}, {"timeout_s", timeout_s}, {"max_restarts", restarts}}));
  }

  fs::path dir_;
};

// The documented example (docs/rewards.md): the answer anywhere in the response.
const char* kContainsAnswer = R"(import json, sys
for line in sys.stdin:
    row = json.loads(line)
    hit = str(row["answer"]) in row["response"]
    print(json.dumps({"score": 1.0 if hit else 0.0,
                      "extra": {"id_length": len(row["metadata"].get("id", ""))}}))
)";

TEST_F(CommandRewardTest, ScoresABatchInOrderThroughAPythonScript) {
  CommandReward scorer = reward(script(kContainsAnswer));
  const std::vector<double> scores = scorer.score_batch({{"p", "the answer is 42", "42"},
                                                         {"p", "no idea", "7"},
                                                         {"p", "7 it is", "7", {{"id", "x:1"}}}});
  EXPECT_EQ(scores, (std::vector<double>{1.0, 0.0, 1.0}));
  EXPECT_DOUBLE_EQ(scorer.score({"p", "12", "12"}), 1.0);
  EXPECT_EQ(scorer.processes_started(), 1);  // one long-lived child for every call
}

TEST_F(CommandRewardTest, ALargeBatchDoesNotDeadlockOnFullPipes) {
  // 600 inputs of 8 KB: far more than a pipe holds in either direction, answered line
  // by line while Aspen is still writing.
  CommandReward scorer = reward(script(kContainsAnswer));
  std::vector<RewardInput> inputs;
  for (int i = 0; i < 600; ++i) {
    inputs.push_back({"p", std::string(8192, 'x') + (i % 2 ? "yes" : "no"), "yes"});
  }
  const std::vector<double> scores = scorer.score_batch(inputs);
  ASSERT_EQ(scores.size(), inputs.size());
  for (int i = 0; i < 600; ++i) EXPECT_DOUBLE_EQ(scores[i], i % 2 ? 1.0 : 0.0) << i;
}

TEST_F(CommandRewardTest, AChildThatDiesIsRestartedAndTheBatchRetried) {
  const std::string marker = (dir_ / "crashed").string();
  CommandReward scorer = reward(script(std::string(R"(import json, os, sys
marker = ")") + marker + R"("
for line in sys.stdin:
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)  # the first child dies on its first line
    print(json.dumps({"score": 0.5}))
)"));
  EXPECT_EQ(scorer.score_batch({{"p", "r", "a"}, {"p", "r", "a"}}), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(scorer.processes_started(), 2);
}

TEST_F(CommandRewardTest, AHangIsATimeoutErrorNamingTheCommand) {
  const std::string command = script("import sys, time\nsys.stdin.readline()\ntime.sleep(60)\n");
  CommandReward scorer = reward(command, /*timeout_s=*/0.5, /*restarts=*/1);
  try {
    scorer.score({"p", "r", "a"});
    FAIL() << "a hanging reward command returned";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("before the timeout"), std::string::npos) << what;
    EXPECT_NE(what.find("2 attempts"), std::string::npos) << what;
    EXPECT_NE(what.find(command), std::string::npos) << what;
  }
  EXPECT_EQ(scorer.processes_started(), 2);
}

TEST_F(CommandRewardTest, AKilledChildTakesWhatItStartedWithIt) {
  // The shell runs the script as a child of its own (`; true` defeats exec): killing
  // only the shell would leave the sleeping script running (and holding ctest's pipes).
  const std::string marker = (dir_ / "pid").string();
  const std::string command =
      script("import os, sys, time\nopen('" + marker + "', 'w').write(str(os.getpid()))\n"
             "sys.stdin.readline()\ntime.sleep(60)\n") + "; true";
  CommandReward scorer = reward(command, /*timeout_s=*/0.5, /*restarts=*/0);
  EXPECT_THROW(scorer.score({"p", "r", "a"}), Error);
  std::ifstream pid_file(marker);
  pid_t pid = 0;
  ASSERT_TRUE(pid_file >> pid);
  // Dead: gone, or a zombie its new parent has not reaped yet.
  const auto dead = [pid] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t paren = text.rfind(')');
    return text.empty() || (paren != std::string::npos && text.substr(paren + 2, 1) == "Z");
  };
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = dead();
    if (!gone) usleep(20000);
  }
  EXPECT_TRUE(gone) << "the script (pid " << pid << ") outlived its reward";
}

TEST_F(CommandRewardTest, AMalformedReplyQuotesTheLineAndIsNotRetried) {
  CommandReward scorer =
      reward(script("import sys\nfor line in sys.stdin:\n    print('score: high')\n"));
  try {
    scorer.score_batch({{"p", "r", "a"}});
    FAIL() << "a malformed reply was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("reply 1"), std::string::npos) << what;
    EXPECT_NE(what.find("score: high"), std::string::npos) << what;
  }
  EXPECT_EQ(scorer.processes_started(), 1);
  CommandReward non_finite = reward(
      script("import sys\nfor line in sys.stdin:\n    print('{\"score\": NaN}')\n"));
  EXPECT_THROW(non_finite.score({"p", "r", "a"}), Error);
}

// Two lines per input (a debugging print left in, say): the second line must never be
// read as the next input's score. With the inputs answered 1 then 0, a shift would
// give [1, 0, 1] for three inputs; an error naming the command is the only answer.
TEST_F(CommandRewardTest, CommandRewardRefusesMoreReplyLinesThanRequests) {
  const std::string command = script(
      "import sys\nfor line in sys.stdin:\n"
      "    print('{\"score\": 1}')\n    print('{\"score\": 0}', flush=True)\n");
  CommandReward scorer = reward(command, 30, 0);
  // The extra lines follow the replies at once, so the batch itself is refused; on a
  // machine too loaded to see them within the quiet period, the next batch must be.
  std::string what;
  for (int call = 0; call < 2 && what.empty(); ++call) {
    try {
      scorer.score_batch({{"p", "a", "x"}, {"p", "b", "x"}, {"p", "c", "x"}});
    } catch (const Error& e) {
      what = e.what();
    }
  }
  EXPECT_NE(what.find("answers no request"), std::string::npos) << what;
  EXPECT_NE(what.find(command), std::string::npos) << what;
}

TEST_F(CommandRewardTest, CommandRewardRefusesOutputPrintedBetweenBatches) {
  // A script that answers, then prints one more line a moment later (after the quiet
  // period): the stray line must fail the next batch, not become its first score.
  const std::string command = script(
      "import sys, time\nfor line in sys.stdin:\n    print('{\"score\": 1}', flush=True)\n"
      "    time.sleep(0.2)\n    print('{\"score\": 0}', flush=True)\n");
  CommandReward scorer = reward(command);  // max_restarts 2: not used, a script bug
  EXPECT_EQ(scorer.score({"p", "a", "x"}), 1.0);
  usleep(500000);  // the stray line is written by now
  try {
    scorer.score({"p", "b", "x"});
    FAIL() << "a line printed between batches was read as a reply";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("between batches"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(command), std::string::npos) << e.what();
  }
  EXPECT_EQ(scorer.processes_started(), 1);  // not retried on a fresh child
}

TEST_F(CommandRewardTest, CommandRewardRefusesAReplyEchoingAnotherRequestId) {
  // Each input's request_id is echoed, but the script answers input k with k-1's id (its
  // own off-by-one): the reply is matched to its request, whatever the timing.
  const std::string command = script(
      "import json, sys\nprevious = None\nfor line in sys.stdin:\n"
      "    row = json.loads(line)\n"
      "    print(json.dumps({'score': 1, 'request_id': previous if previous is not None "
      "else row['request_id']}), flush=True)\n"
      "    previous = row['request_id']\n");
  CommandReward scorer = reward(command, 30, 0);
  try {
    scorer.score_batch({{"p", "a", "x"}, {"p", "b", "x"}});
    FAIL() << "a reply with another request's id was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("reply 2"), std::string::npos) << what;
    EXPECT_NE(what.find("request_id 0 where request_id 1 was sent"), std::string::npos) << what;
  }
  // Echoed right, the ids go on counting across batches.
  CommandReward echoing = reward(script(
      "import json, sys\nfor line in sys.stdin:\n    row = json.loads(line)\n"
      "    print(json.dumps({'score': row['request_id'], 'request_id': row['request_id']}), "
      "flush=True)\n"));
  EXPECT_EQ(echoing.score_batch({{"p", "a", "x"}, {"p", "b", "x"}}), (std::vector<double>{0, 1}));
  EXPECT_EQ(echoing.score({"p", "c", "x"}), 2.0);
}

TEST_F(CommandRewardTest, CommandRewardRefusesAScoreBeyondTheBoundNamingTheValue) {
  // 1e308 is finite, but two of them average to inf, written to metrics as JSON null.
  const std::string command =
      script("import sys\nfor line in sys.stdin:\n    print('{\"score\": 1e308}', flush=True)\n");
  CommandReward scorer = reward(command, 30, 0);
  try {
    scorer.score_batch({{"p", "a", "x"}, {"p", "b", "x"}});
    FAIL() << "a score of 1e308 was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1e+308"), std::string::npos) << what;
    EXPECT_NE(what.find("outside [-1e6, 1e6]"), std::string::npos) << what;
    EXPECT_NE(what.find(command), std::string::npos) << what;
  }
  CommandReward at_bound = reward(
      script("import sys\nfor line in sys.stdin:\n    print('{\"score\": -1e6}', flush=True)\n"));
  EXPECT_EQ(at_bound.score({"p", "a", "x"}), -1e6);
}

TEST_F(CommandRewardTest, AChildOutlivesTheThreadThatStartedIt) {
  // The child dies with Aspen, not with the thread that started it (as PR_SET_PDEATHSIG
  // would have it): a reward worker thread that ends must not take the script with it.
  CommandReward scorer = reward(script(kContainsAnswer), 30, 0);
  std::thread([&] { EXPECT_EQ(scorer.score({"p", "42", "42"}), 1.0); }).join();
  usleep(100000);
  EXPECT_EQ(scorer.score({"p", "41", "42"}), 0.0);
  EXPECT_EQ(scorer.processes_started(), 1);
}

TEST_F(CommandRewardTest, ACommandThatCannotRunFailsWithItsName) {
  CommandReward scorer = reward("/nonexistent/reward-binary", 10, 0);
  try {
    scorer.score({"p", "r", "a"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/reward-binary"), std::string::npos)
        << e.what();
  }
}

TEST_F(CommandRewardTest, OptionsAreCheckedByName) {
  auto refusal = [](const nlohmann::json& options) -> std::string {
    try {
      make_verifier("command", options);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(nlohmann::json::object()).find("command"), std::string::npos);
  EXPECT_NE(refusal({{"command", "x"}, {"timeout_s", 0}}).find("timeout_s"), std::string::npos);
  EXPECT_NE(refusal({{"command", "x"}, {"timeout", 1}}).find("timeout"), std::string::npos);
}

TEST_F(CommandRewardTest, CombinesByWeightWithBuiltInVerifiers) {
  const nlohmann::json spec = {
      {{"name", "script"}, {"verifier", "command"}, {"weight", 0.5},
       {"options", {{"command", script(kContainsAnswer)}}}},
      {{"name", "acc"}, {"verifier", "math"}, {"weight", 1.0}}};
  const std::unique_ptr<Verifier> weighted = make_verifier("weighted", spec);
  const std::vector<double> scores =
      weighted->score_batch({{"p", "\\boxed{42}", "42"}, {"p", "\\boxed{41}", "42"}});
  EXPECT_EQ(scores, (std::vector<double>{1.5, 0.0}));
}

TEST_F(CommandRewardTest, TheDocumentedExampleScriptRunsAsWritten) {
  // docs/rewards.md shows examples/rewards/contains_answer.py verbatim.
  const std::string path = std::string(ASPEN_SOURCE_DIR) + "/examples/rewards/contains_answer.py";
  std::ifstream docs(std::string(ASPEN_SOURCE_DIR) + "/docs/rewards.md");
  std::ifstream example(path);
  const std::string doc_text((std::istreambuf_iterator<char>(docs)), {});
  const std::string example_text((std::istreambuf_iterator<char>(example)), {});
  EXPECT_NE(doc_text.find(example_text), std::string::npos) << "docs/rewards.md is out of date";
  CommandReward scorer = reward(std::string(ASPEN_PYTHON) + " " + path);
  EXPECT_EQ(scorer.score_batch({{"p", "so 42.", "42", {{"id", "a"}}}, {"p", "7", "42", {{"id", "b"}}}}),
            (std::vector<double>{1.0, 0.0}));
}

}  // namespace
}  // namespace aspen::reward
