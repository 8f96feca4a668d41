// What a new user met on a first walkthrough (issue 16), pinned: `aspen train --help`
// points at every key and explains the console columns; `aspen sft` reports progress
// against its total and writes the configuration it ran; summary.json's throughput is
// that of the RL iterations alone; `aspen demo` says it is not the RL demo; the demo
// script builds only the binary it runs (the first run had built the whole test suite,
// over an hour on 2 cores).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/tiny_run_overrides.h"

namespace aspen::cli {
namespace {

using testing::run_command;

TEST(FirstRunFindings, TrainHelpNamesTheKeysAndTheConsoleColumns) {
  const auto help = run_command(testing::aspen_cli() + " train --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  for (const char* text : {"docs/config.md", "--config-reference", "model, data,",
                           "reward (mean verifier score)", "acc (share of", "eval_acc"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text << "\n" << help.out;
  }
  const auto reference = run_command(testing::aspen_cli() + " train --config-reference");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  EXPECT_NE(reference.out.find("| `prompts_per_iteration` | 16 |"), std::string::npos);
}

TEST(FirstRunFindings, SftCountsStepsAgainstItsTotalAndWritesItsConfig) {
  const std::string dir = testing::scratch_dir() + "/sft";
  const auto result = run_command(
      testing::aspen_cli() + " sft --out " + dir +
      " model.hidden_size=32 model.num_layers=1 model.head_dim=8 model.intermediate_size=64"
      " train.sft_steps=60 train.sft_batch_size=8 data.train_size=200 data.eval_size=8");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("sft step   50/60"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("sft step   60/60"), std::string::npos) << result.out;
  const auto config = nlohmann::json::parse(testing::read_text(dir + "/config.json"));
  EXPECT_EQ(config["train"]["sft_steps"], 60);
  EXPECT_EQ(config["model"]["hidden_size"], 32);
}

TEST(FirstRunFindings, SummaryThroughputIsThatOfTheRlIterationsAlone) {
  const std::string dir = testing::scratch_dir() + "/run";
  std::string train = testing::aspen_cli() + " train --out " + dir;
  for (const auto& o : testing::tiny_run_overrides()) train += " " + o;
  const auto result = run_command(train);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto summary = nlohmann::json::parse(testing::read_text(dir + "/summary.json"));
  const double rl_seconds = summary["rl_seconds"].get<double>();
  EXPECT_LT(rl_seconds, summary["wall_seconds"].get<double>());  // SFT and evals excluded
  EXPECT_NEAR(summary["tokens_per_second"].get<double>(),
              summary["trained_tokens"].get<double>() / rl_seconds, 1e-6 * summary["tokens_per_second"].get<double>());
}

TEST(FirstRunFindings, TheGenerationDemoSaysItIsNotTheRlDemo) {
  const auto help = run_command(testing::aspen_cli() + " --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("the RL demo is aspen train with no config"), std::string::npos)
      << help.out;
}

TEST(FirstRunFindings, TheDemoScriptBuildsOnlyTheBinaryItRuns) {
  const std::string root = ASPEN_SOURCE_DIR;
  const std::string demo = testing::read_text(root + "/scripts/demo");
  const std::string build = testing::read_text(root + "/scripts/build");
  EXPECT_NE(demo.find("ASPEN_BUILD_TARGET=aspen_cli \"$root/scripts/build\""), std::string::npos)
      << demo;
  EXPECT_NE(build.find("--target \"$ASPEN_BUILD_TARGET\""), std::string::npos) << build;
}

}  // namespace
}  // namespace aspen::cli
