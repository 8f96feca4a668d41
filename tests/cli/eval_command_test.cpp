// `aspen eval`: pass@k of a random-weight HF checkpoint (written by transformers) on a
// JSONL file, scored by a Python reward script through --reward-command. The script
// logs what it scored; the test recomputes pass@k from that log and compares.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "support/oracles.h"

namespace aspen::cli {
namespace {

using testing::run_command;

std::string eval_model_dir() {
  nlohmann::json model = {{"arch", "qwen3"}, {"tied", true}, {"seed", 11}, {"vocab", 151936}};
  model["eos_token_id"] = 151645;
  return testing::hf_model_dir_with_qwen3_tokenizer(testing::scratch_dir() + "/model", model,
                                                     testing::scratch_dir());
}

double choose_ratio(int64_t n, int64_t c, int64_t k) {  // C(n-c, k) / C(n, k)
  if (n - c < k) return 0.0;
  double ratio = 1.0;
  for (int64_t i = 0; i < k; ++i) ratio *= static_cast<double>(n - c - i) / (n - i);
  return ratio;
}

TEST(EvalCommand, PassAtKFromAPythonRewardMatchesTheScoresItGave) {
  const std::string dir = testing::scratch_dir();
  const std::string model = eval_model_dir();
  testing::write_text(dir + "/data.jsonl",
                      "{\"prompt\": \"One\", \"answer\": \"1\"}\n"
                      "{\"prompt\": \"Two\", \"answer\": \"2\"}\n"
                      "{\"prompt\": \"Three\", \"answer\": \"3\"}\n");
  // Scores by the parity of the response's length: random weights make that a coin.
  testing::write_text(dir + "/reward.py",
                      "import json, sys\n"
                      "log = open(sys.argv[1], 'a')\n"
                      "for line in sys.stdin:\n"
                      "    row = json.loads(line)\n"
                      "    score = float(len(row['response']) % 2)\n"
                      "    log.write(json.dumps([row['metadata']['id'], score]) + '\\n')\n"
                      "    log.flush()\n"
                      "    print(json.dumps({'score': score}), flush=True)\n");
  const auto result = run_command(
      testing::aspen_cli() + " eval --model " + model + " --data " + dir +
      "/data.jsonl --n 4 --max-tokens 5 --seed 3 --reward-command '" +
      std::string(ASPEN_PYTHON) + " " + dir + "/reward.py " + dir + "/scored.jsonl'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json out = nlohmann::json::parse(result.out);
  EXPECT_EQ(out["examples"], 3);
  EXPECT_EQ(out["n"], 4);
  EXPECT_EQ(out["temperature"], 1.0);

  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // id -> (samples, correct)
  std::istringstream log(testing::read_text(dir + "/scored.jsonl"));
  double total = 0.0;
  int64_t scored = 0;
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json entry = nlohmann::json::parse(line);
    auto& [samples, correct] = counts[entry[0].get<std::string>()];
    ++samples;
    correct += entry[1].get<double>() >= 1.0 ? 1 : 0;
    total += entry[1].get<double>();
    ++scored;
  }
  ASSERT_EQ(counts.size(), 3u);
  ASSERT_EQ(scored, 12);
  EXPECT_NEAR(out["mean_score"].get<double>(), total / 12.0, 1e-12);
  for (int64_t k : {1, 2, 4}) {
    double want = 0.0;
    for (const auto& [id, count] : counts) {
      EXPECT_EQ(count.first, 4) << id;
      want += 1.0 - choose_ratio(4, count.second, k);
    }
    EXPECT_NEAR(out["pass@" + std::to_string(k)].get<double>(), want / 3.0, 1e-12) << k;
  }
}

// One model for the reward tests below, written once per test process and removed at
// its exit (ctest runs each test in a process of its own: 49 MB each would pile up).
const std::string& shared_model_dir() {
  static const std::string root =
      ::testing::TempDir() + "/aspen_eval_reward_model_" + std::to_string(getpid());
  static const std::string dir = [] {
    std::filesystem::remove_all(root);
    std::atexit([] { std::filesystem::remove_all(root); });
    std::filesystem::create_directories(root + "/scratch");
    nlohmann::json model = {{"arch", "qwen3"}, {"tied", true}, {"seed", 11}, {"vocab", 151936}};
    model["eos_token_id"] = 151645;
    return testing::hf_model_dir_with_qwen3_tokenizer(root + "/model", model, root + "/scratch");
  }();
  return dir;
}

// `aspen eval` of three examples, one greedy sample of 2 tokens each, scored by the Python
// `script` (written to DIR/reward.py), with `extra` arguments.
std::string eval_with_script(const std::string& dir, const std::string& script,
                             const std::string& extra = "") {
  testing::write_text(dir + "/data.jsonl",
                      "{\"prompt\": \"One\", \"answer\": \"1\"}\n"
                      "{\"prompt\": \"Two\", \"answer\": \"2\"}\n"
                      "{\"prompt\": \"Three\", \"answer\": \"3\"}\n");
  testing::write_text(dir + "/reward.py", script);
  return testing::aspen_cli() + " eval --model " + shared_model_dir() + " --data " + dir +
         "/data.jsonl --max-tokens 2 --reward-command '" + std::string(ASPEN_PYTHON) + " " + dir +
         "/reward.py' " + extra;
}

TEST(EvalCommand, VerifierOptionsApplyToTheRewardCommand) {
  // data.verifier_options.timeout_s=0.5 with a script that never answers: an error within
  // seconds, not the default 60 s times 3 attempts (`timeout 40` marks that as 124).
  const std::string dir = testing::scratch_dir();
  const auto result = run_command(
      "timeout 40 " +
      eval_with_script(dir, "import sys, time\nsys.stdin.readline()\ntime.sleep(60)\n",
                       "data.verifier_options.timeout_s=0.5 data.verifier_options.max_restarts=0"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.exit_code, 124) << "timeout_s was ignored";
  EXPECT_NE(result.err.find("before the timeout (1 attempts"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(dir + "/reward.py"), std::string::npos) << result.err;
}

TEST(EvalCommand, ARewardScriptPrintingTwoLinesPerInputIsAnErrorNotAShiftedMean) {
  const std::string dir = testing::scratch_dir();
  const auto result = run_command(eval_with_script(
      dir, "import sys\nfor line in sys.stdin:\n    print('{\"score\": 1}')\n"
           "    print('{\"score\": 0}', flush=True)\n"));
  EXPECT_NE(result.exit_code, 0) << result.out;
  EXPECT_NE(result.err.find("print exactly one reply line per request line"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find(dir + "/reward.py"), std::string::npos) << result.err;
  EXPECT_EQ(result.out.find("mean_score"), std::string::npos) << result.out;
}

TEST(EvalCommand, AScoreTooLargeToAverageIsAnErrorNotANullMean) {
  // 1e308 is a finite double, but three of them sum to inf: mean_score was JSON null.
  const std::string dir = testing::scratch_dir();
  const auto result = run_command(eval_with_script(
      dir, "import sys\nfor line in sys.stdin:\n    print('{\"score\": 1e308}', flush=True)\n"));
  EXPECT_NE(result.exit_code, 0) << result.out;
  EXPECT_NE(result.err.find("score 1e+308 is outside [-1e6, 1e6]"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(dir + "/reward.py"), std::string::npos) << result.err;
  EXPECT_EQ(result.out.find("null"), std::string::npos) << result.out;
}

TEST(EvalCommand, AKilledEvalTakesItsRewardScriptWithIt) {
  // The script records its pid, then never answers; `aspen eval` is SIGKILLed while it
  // waits (no tear-down runs): the script must die with it, not sleep on as an orphan.
  const std::string dir = testing::scratch_dir();
  const std::string pid_file = dir + "/script.pid";
  const std::string command =
      eval_with_script(dir,
                       "import os, sys, time\n"
                       "open(sys.argv[0] + '.tmp', 'w').write(str(os.getpid()))\n"
                       "os.rename(sys.argv[0] + '.tmp', '" + pid_file + "')\n"
                       "sys.stdin.readline()\ntime.sleep(120)\n") +
      " > /dev/null 2>&1 & echo $! > " + dir + "/eval.pid";
  ASSERT_EQ(std::system(command.c_str()), 0);
  pid_t eval_pid = 0;
  std::ifstream(dir + "/eval.pid") >> eval_pid;
  ASSERT_GT(eval_pid, 0);
  pid_t script_pid = 0;
  for (int i = 0; i < 1200 && script_pid == 0; ++i) {  // model load and generation first
    std::ifstream(pid_file) >> script_pid;
    if (script_pid == 0) usleep(50000);
  }
  kill(eval_pid, SIGKILL);
  ASSERT_GT(script_pid, 0) << "the reward script never started";
  // Dead: gone, or a zombie its new parent has not reaped yet.
  const auto dead = [script_pid] {
    std::ifstream stat("/proc/" + std::to_string(script_pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t paren = text.rfind(')');
    return text.empty() || (paren != std::string::npos && text.substr(paren + 2, 1) == "Z");
  };
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {  // 5 s
    gone = dead();
    if (!gone) usleep(50000);
  }
  EXPECT_TRUE(gone) << "the reward script (pid " << script_pid << ") outlived aspen eval";
  if (!gone) kill(script_pid, SIGKILL);
}

TEST(EvalCommand, AMissingModelIsAOneLineErrorNamingIt) {
  const std::string data = testing::scratch_dir() + "/data.jsonl";
  testing::write_text(data, "{\"prompt\": \"One\", \"answer\": \"1\"}\n");
  const auto result =
      run_command(testing::aspen_cli() + " eval --model /nonexistent/model --data " + data);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("/nonexistent/model"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("terminate"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
