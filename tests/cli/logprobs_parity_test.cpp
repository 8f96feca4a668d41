// Acceptance test of `aspen logprobs`: HF transformers writes random-weight tiny
// Qwen2 and Qwen3 checkpoints with the full 151,936-id vocabulary stored in bf16
// (tools/python/hf_reference.py), and the CLI's per-token log-probs must match
// transformers' fp32 ones for the same stdin to 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "tiny_model_dir.h"

namespace aspen::cli {
namespace {

using testing::run_command;

const char* kTokens =
    "{\"tokens\": [151643, 9707, 1879, 0, 220, 108386, 151644, 872, 198, 16]}\n"
    "{\"tokens\": [5, 151935, 100000, 42]}\n"
    "{\"tokens\": [77]}\n"
    "{\"tokens\": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, "
    "8]}\n";

nlohmann::json qwen_vocab_model(const std::string& arch, bool tied, int seed) {
  return {{"arch", arch}, {"tied", tied}, {"seed", seed}, {"vocab", 151936}, {"dtype", "bfloat16"}};
}

void expect_parity(const nlohmann::json& model, const std::string& dtype, double tolerance) {
  const std::string dir = testing::scratch_dir() + "/model";
  std::vector<nlohmann::json> jobs = {testing::hf_make_job(dir, model)};
  std::istringstream token_lines(kTokens);
  for (std::string line; std::getline(token_lines, line);) {
    const auto tokens = nlohmann::json::parse(line)["tokens"].get<std::vector<int64_t>>();
    jobs.push_back(testing::hf_logprobs_job(dir, tokens));
  }
  const auto expected = testing::run_hf_reference(jobs, testing::scratch_dir());
  ASSERT_TRUE(expected.ok(jobs.size())) << expected.errors;
  const auto actual =
      run_command(testing::aspen_cli() + " logprobs --dtype " + dtype + " --model " + dir, kTokens);
  ASSERT_EQ(actual.exit_code, 0) << actual.err;

  std::istringstream actual_lines(actual.out);
  std::string a;
  int lines = 0;
  double max_diff = 0.0;
  for (size_t job = 1; job < jobs.size(); ++job) {
    ASSERT_TRUE(static_cast<bool>(std::getline(actual_lines, a)))
        << "missing output line " << lines;
    const auto ej = expected.results[job]["logprobs"];
    const auto aj = nlohmann::json::parse(a)["logprobs"];
    ASSERT_EQ(ej.size(), aj.size()) << "line " << lines;
    for (size_t i = 0; i < ej.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(ej[i].get<double>() - aj[i].get<double>()));
    }
    ++lines;
  }
  EXPECT_FALSE(static_cast<bool>(std::getline(actual_lines, a))) << "extra output: " << a;
  EXPECT_EQ(lines, 4);
  std::printf("%s %s: max |aspen - transformers| = %.3g\n",
              model["arch"].get<std::string>().c_str(), dtype.c_str(), max_diff);
  EXPECT_LT(max_diff, tolerance) << model["arch"] << " max |diff| = " << max_diff;
}

TEST(LogprobsCommand, Qwen2TiedMatchesTransformers) {
  expect_parity(qwen_vocab_model("qwen2", /*tied=*/true, 11), "fp32", 1e-4);
}

TEST(LogprobsCommand, Qwen3UntiedMatchesTransformers) {
  expect_parity(qwen_vocab_model("qwen3", /*tied=*/false, 11), "fp32", 1e-4);
}

TEST(LogprobsCommand, Bf16ComputeStaysCloseToFp32Transformers) {
  // bf16 activations lose ~3 significant digits; log-probs are still accumulated in fp32.
  expect_parity(qwen_vocab_model("qwen3", /*tied=*/false, 11), "bf16", 0.5);
}

TEST(LogprobsCommand, BadInputGetsOneClearLineAndNonZeroExit) {
  const std::string dir = testing::scratch_dir() + "/m";
  const std::vector<nlohmann::json> jobs = {
      testing::hf_make_job(dir, qwen_vocab_model("qwen3", /*tied=*/false, 1))};
  const auto made = testing::run_hf_reference(jobs, testing::scratch_dir());
  ASSERT_TRUE(made.ok(jobs.size())) << made.errors;
  const auto out_of_vocab =
      run_command(testing::aspen_cli() + " logprobs --model " + dir, "{\"tokens\": [1, 151936]}\n");
  EXPECT_EQ(out_of_vocab.exit_code, 1);
  EXPECT_NE(out_of_vocab.err.find("stdin: line 1"), std::string::npos) << out_of_vocab.err;
  EXPECT_NE(out_of_vocab.err.find("outside the vocabulary"), std::string::npos);
  const auto missing = run_command(testing::aspen_cli() + " logprobs --model /nonexistent/model");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model"), std::string::npos) << missing.err;
  const auto bad_dtype = run_command(testing::aspen_cli() + " logprobs --dtype fp8 --model " + dir);
  EXPECT_EQ(bad_dtype.exit_code, 1);
  EXPECT_NE(bad_dtype.err.find("--dtype"), std::string::npos);
}

// Positions past max_position_embeddings have no trained meaning: such a line is refused,
// naming it and both lengths; a line of exactly the context still scores.
TEST(LogprobsCommand, ASequenceLongerThanTheContextIsRefusedNamingTheLine) {
  const std::string dir =
      testing::write_tiny_model_dir(testing::scratch_dir() + "/model", /*context=*/8);
  const std::string fits = "{\"tokens\": [1, 2, 3, 4, 5, 6, 7, 8]}\n";
  const auto ok = run_command(testing::aspen_cli() + " logprobs --model " + dir, fits);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["logprobs"].size(), 7u);
  const auto long_line = run_command(testing::aspen_cli() + " logprobs --model " + dir,
                                     fits + "{\"tokens\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n");
  EXPECT_EQ(long_line.exit_code, 1);
  EXPECT_NE(long_line.err.find("stdin: line 2: 9 tokens, more than the model's context of 8"),
            std::string::npos)
      << long_line.err;
}

}  // namespace
}  // namespace aspen::cli
