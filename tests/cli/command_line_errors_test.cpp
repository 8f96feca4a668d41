// A bad flag is bad input like any other: `aspen` prints one line that names the flag and
// the command whose --help lists the right ones, and exits non-zero; --help still prints
// the help and exits 0.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

using testing::run_command;

int count_lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

TEST(CommandLineErrors, AFlagThatDoesNotParseIsOneLineNamingItAndTheCommandsHelp) {
  const auto result = run_command(testing::aspen_cli() + " generate --model m --prompt p"
                                  " --kv-cache-mb 9e12");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(count_lines(result.err), 1) << result.err;
  EXPECT_NE(result.err.find("aspen: error: command line:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("--kv-cache-mb"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("aspen generate --help"), std::string::npos) << result.err;
}

TEST(CommandLineErrors, AnUnknownFlagIsOneLineNamingIt) {
  const auto result = run_command(testing::aspen_cli() + " info --model m --bogus");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(count_lines(result.err), 1) << result.err;
  EXPECT_NE(result.err.find("--bogus"), std::string::npos) << result.err;
}

TEST(CommandLineErrors, HelpStillPrintsTheHelpAndExitsZero) {
  const auto result = run_command(testing::aspen_cli() + " generate --help");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("--kv-cache-mb"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace aspen::cli
