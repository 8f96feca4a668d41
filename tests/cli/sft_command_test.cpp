// `aspen sft` writes an HF-layout checkpoint that the other commands load, and
// SFT on the built-in task lowers nothing but the NLL it reports.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

using testing::run_command;

TEST(SftCommand, WritesACheckpointTheOtherCommandsLoad) {
  const std::string dir = testing::scratch_dir() + "/run";
  const auto result = run_command(
      testing::aspen_cli() + " sft --out " + dir +
      " model.hidden_size=32 model.num_layers=1 model.head_dim=8 model.intermediate_size=64"
      " train.sft_steps=60 train.sft_batch_size=8 data.train_size=200 data.eval_size=8"
      " logging.console=false");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto summary = nlohmann::json::parse(testing::read_text(dir + "/summary.json"));
  EXPECT_EQ(summary["steps"], 60);
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::vector<double> nll;
  for (std::string line; std::getline(metrics, line);) {
    nll.push_back(nlohmann::json::parse(line)["nll"].get<double>());
  }
  ASSERT_GE(nll.size(), 2u);
  EXPECT_LT(nll.back(), nll.front());

  const auto info = run_command(testing::aspen_cli() + " info --model " + dir + "/final");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["architecture"], "Qwen3ForCausalLM");
  const auto generated =
      run_command(testing::aspen_cli() + " generate --model " + dir +
                  "/final --prompt '12+34=' --temperature 0 --max-tokens 4 --json");
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
}

TEST(SftCommand, RejectsZeroSteps) {
  const auto result =
      run_command(testing::aspen_cli() + " sft train.sft_steps=0 --out " + testing::scratch_dir());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("train.sft_steps"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
