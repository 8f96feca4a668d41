// `aspen generate --lora DIR` and `aspen logprobs --lora DIR` on the tiny model of
// tiny_model_dir.h with adapters of tiny_adapter_dir.h: the adapter applied unmerged
// gives the log-probs and greedy tokens of the model with it merged into its weights,
// and bad --lora input is one line naming it. (`aspen serve --lora`:
// serve_command_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli_test_util.h"
#include "tiny_adapter_dir.h"
#include "tiny_model_dir.h"

namespace aspen::cli {
namespace {

using testing::run_command;

const char* kAdapterTokens =
    "{\"tokens\": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4]}\n"
    "{\"tokens\": [49, 0, 17, 33]}\n";

io::ModelConfig tiny_base_config() {
  return testing::tiny_config(io::ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/8);
}

std::vector<std::vector<double>> adapter_logprob_lines(const std::string& out) {
  std::vector<std::vector<double>> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line)["logprobs"].get<std::vector<double>>());
  }
  return lines;
}

double max_logprob_difference(const std::vector<std::vector<double>>& a,
                              const std::vector<std::vector<double>>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < a[i].size(); ++j) most = std::max(most, std::abs(a[i][j] - b[i][j]));
  }
  return most;
}

TEST(LoraCommands, LogprobsWithAnAdapterEqualTheMergedModelsForEveryTargetSet) {
  const std::string dir = testing::scratch_dir();
  const std::string model = testing::write_tiny_model_dir(dir + "/model");
  const auto base =
      run_command(testing::aspen_cli() + " logprobs --model " + model, kAdapterTokens);
  ASSERT_EQ(base.exit_code, 0) << base.err;
  struct Case {
    std::vector<std::string> targets;
    bool rslora;
  };
  for (const Case& c : {Case{{"q_proj", "v_proj"}, false},
                        Case{{"k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, true}}) {
    const auto adapter = testing::write_tiny_adapter_dir(dir + "/adapter", tiny_base_config(),
                                                         c.targets, 11, c.rslora);
    const std::string merged = testing::write_merged_model_dir(model, adapter, dir + "/merged");
    const auto with_lora = run_command(
        testing::aspen_cli() + " logprobs --model " + model + " --lora " + dir + "/adapter",
        kAdapterTokens);
    ASSERT_EQ(with_lora.exit_code, 0) << with_lora.err;
    const auto want =
        run_command(testing::aspen_cli() + " logprobs --model " + merged, kAdapterTokens);
    ASSERT_EQ(want.exit_code, 0) << want.err;
    const auto got = adapter_logprob_lines(with_lora.out);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_LT(max_logprob_difference(got, adapter_logprob_lines(want.out)), 1e-5)
        << c.targets.front();
    // The adapter matters: without it the scores are others.
    EXPECT_GT(max_logprob_difference(got, adapter_logprob_lines(base.out)), 1e-2)
        << c.targets.front();
  }
}

TEST(LoraCommands, GenerateWithAnAdapterGivesTheMergedModelsGreedyTokensAndLogprobs) {
  const std::string dir = testing::scratch_dir();
  const std::string model = testing::write_tiny_model_dir(dir + "/model");
  const auto adapter = testing::write_tiny_adapter_dir(
      dir + "/adapter", tiny_base_config(), {"q_proj", "k_proj", "v_proj", "down_proj"}, 12);
  const std::string merged = testing::write_merged_model_dir(model, adapter, dir + "/merged");
  const std::string flags =
      " --prompt abcab --max-tokens 12 --temperature 0 --json --kv-cache-mb 4";
  const auto with_lora = run_command(testing::aspen_cli() + " generate --model " + model +
                                     " --lora " + dir + "/adapter" + flags);
  ASSERT_EQ(with_lora.exit_code, 0) << with_lora.err;
  const auto want = run_command(testing::aspen_cli() + " generate --model " + merged + flags);
  ASSERT_EQ(want.exit_code, 0) << want.err;
  const auto without = run_command(testing::aspen_cli() + " generate --model " + model + flags);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const nlohmann::json got = nlohmann::json::parse(with_lora.out);
  const nlohmann::json merged_out = nlohmann::json::parse(want.out);
  EXPECT_EQ(got["token_ids"], merged_out["token_ids"]);
  ASSERT_EQ(got["logprobs"].size(), merged_out["logprobs"].size());
  for (size_t i = 0; i < got["logprobs"].size(); ++i) {
    EXPECT_NEAR(got["logprobs"][i].get<double>(), merged_out["logprobs"][i].get<double>(), 1e-5);
  }
  EXPECT_NE(got["token_ids"], nlohmann::json::parse(without.out)["token_ids"]);
}

// Each bad --lora is refused with one line naming it, before or while the model loads.
TEST(LoraCommands, BadAdapterInputIsOneLineNamingIt) {
  const std::string dir = testing::scratch_dir();
  const std::string model = testing::write_tiny_model_dir(dir + "/model");
  // Trained for another shape of model: q_proj is 4 heads x 12 here, 4 x 8 there.
  testing::write_tiny_adapter_dir(
      dir + "/other_shape", testing::tiny_config(io::ModelFamily::kQwen3, false, /*head_dim=*/12),
      {"q_proj"}, 13);
  // lm_head is a Linear PEFT can adapt, but not a projection Aspen has adapters for.
  {
    io::LoraAdapter head;
    head.config.rank = 2;
    head.config.target_modules = {"lm_head"};
    head.tensors["lm_head.lora_A.weight"] = torch::randn({2, 32});
    head.tensors["lm_head.lora_B.weight"] = torch::randn({50, 2});
    io::write_peft_adapter(dir + "/head", head);
  }
  struct Case {
    std::string lora;
    std::string named;
  };
  for (const Case& c :
       {Case{dir + "/missing", "--lora " + dir + "/missing: no such adapter directory"},
        Case{dir + "/model", "--lora " + dir + "/model: missing"},
        Case{dir + "/other_shape", "model.layers.0.self_attn.q_proj.lora_B.weight\" has shape"},
        Case{dir + "/head",
             "target_modules entry 'lm_head' is not a projection Aspen can adapt"}}) {
    // generate reads --lora by the same code (cli/lora_option.h): one case suffices.
    std::vector<std::string> commands = {"logprobs"};
    if (c.lora == dir + "/missing") commands.push_back("generate --prompt ab --kv-cache-mb 4");
    for (const std::string& command : commands) {
      const auto result = run_command(
          testing::aspen_cli() + " " + command + " --model " + model + " --lora " + c.lora,
          "{\"tokens\": [1, 2]}\n");
      EXPECT_EQ(result.exit_code, 1) << command << " --lora " << c.lora << ": " << result.out;
      EXPECT_NE(result.err.find(c.named), std::string::npos) << command << ": " << result.err;
      EXPECT_NE(result.err.find(c.lora), std::string::npos) << command << ": " << result.err;
      EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "one line: " << result.err;
    }
  }
}

}  // namespace
}  // namespace aspen::cli
