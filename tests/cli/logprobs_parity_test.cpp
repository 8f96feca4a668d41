// Acceptance test of `aspen logprobs`: random-weight tiny Qwen2 and Qwen3
// checkpoints with the full 151,936-entry vocabulary are written by another
// program (tests/model/reference_qwen.py, numpy only), and the CLI's per-token
// log-probs must match that program's independent float64 implementation to 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen {
namespace {

using testing::run_command;

const char* kTokens =
    "{\"tokens\": [151643, 9707, 1879, 0, 220, 108386, 151644, 872, 198, 16]}\n"
    "{\"tokens\": [5, 151935, 100000, 42]}\n"
    "{\"tokens\": [77]}\n"
    "{\"tokens\": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, "
    "8]}\n";

void expect_parity(const std::string& family, const std::string& extra, const std::string& dtype,
                   double tolerance) {
  const std::string dir = testing::scratch_dir() + "/" + family;
  const std::string script = std::string(ASPEN_SOURCE_DIR) + "/tests/model/reference_qwen.py";
  const std::string python = testing::system_python();
  const auto written = run_command(python + " " + script + " write-checkpoint --family " + family +
                                   " --out " + dir + " --seed 11 " + extra);
  ASSERT_EQ(written.exit_code, 0) << written.err;
  const auto expected = run_command(python + " " + script + " logprobs --model " + dir, kTokens);
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  const auto actual =
      run_command(testing::aspen_cli() + " logprobs --dtype " + dtype + " --model " + dir, kTokens);
  ASSERT_EQ(actual.exit_code, 0) << actual.err;

  std::istringstream expected_lines(expected.out), actual_lines(actual.out);
  std::string e, a;
  int lines = 0;
  double max_diff = 0.0;
  while (std::getline(expected_lines, e)) {
    ASSERT_TRUE(static_cast<bool>(std::getline(actual_lines, a)))
        << "missing output line " << lines;
    const auto ej = nlohmann::json::parse(e)["logprobs"];
    const auto aj = nlohmann::json::parse(a)["logprobs"];
    ASSERT_EQ(ej.size(), aj.size()) << "line " << lines;
    for (size_t i = 0; i < ej.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(ej[i].get<double>() - aj[i].get<double>()));
    }
    ++lines;
  }
  EXPECT_EQ(lines, 4);
  EXPECT_LT(max_diff, tolerance) << family << " max |diff| = " << max_diff;
}

TEST(LogprobsCommand, Qwen2TiedMatchesIndependentImplementation) {
  expect_parity("qwen2", "--tied", "fp32", 1e-4);
}

TEST(LogprobsCommand, Qwen3UntiedMatchesIndependentImplementation) {
  expect_parity("qwen3", "--untied", "fp32", 1e-4);
}

TEST(LogprobsCommand, Bf16ComputeStaysCloseToFloat64Reference) {
  // bf16 activations lose ~3 significant digits; log-probs are still accumulated in fp32.
  expect_parity("qwen3", "--untied", "bf16", 0.5);
}

TEST(LogprobsCommand, BadInputGetsOneClearLineAndNonZeroExit) {
  const std::string dir = testing::scratch_dir() + "/m";
  const std::string script = std::string(ASPEN_SOURCE_DIR) + "/tests/model/reference_qwen.py";
  ASSERT_EQ(run_command(testing::system_python() + " " + script +
                        " write-checkpoint --family qwen3 --out " + dir + " --seed 1")
                .exit_code,
            0);
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

}  // namespace
}  // namespace aspen
