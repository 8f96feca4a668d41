// `aspen eval`: pass@k of a random-weight HF checkpoint (written by transformers) on a
// JSONL file, scored by a Python reward script through --reward-command. The script
// logs what it scored; the test recomputes pass@k from that log and compares.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "support/oracles.h"

namespace aspen {
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
}  // namespace aspen
