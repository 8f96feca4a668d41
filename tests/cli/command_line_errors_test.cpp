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

// A model directory that is a file or missing is named with its flag or key before any
// of its files is read (before: the tokenizer parsed the file as JSON and reported that).
TEST(CommandLineErrors, AModelDirectoryThatIsAFileOrMissingIsOneLineNamingTheFlagOrKey) {
  const std::string file = testing::scratch_dir() + "/not_a_model";
  testing::write_text(file, "hi\n");
  for (const char* command :
       {" serve", " generate --prompt p", " info", " logprobs < /dev/null", " eval --data d"}) {
    const auto result = run_command(testing::aspen_cli() + command + " --model " + file);
    EXPECT_NE(result.exit_code, 0) << command;
    EXPECT_EQ(count_lines(result.err), 1) << command << ": " << result.err;
    EXPECT_NE(result.err.find("--model " + file + ": is not a directory"), std::string::npos)
        << command << ": " << result.err;
  }
  const std::string missing = testing::scratch_dir() + "/no_such_model";
  const auto train = run_command(testing::aspen_cli() + " train model.path=" + missing + " --out " +
                                 testing::scratch_dir() + "/run");
  EXPECT_NE(train.exit_code, 0);
  EXPECT_NE(train.err.find("model.path " + missing + ": does not exist"), std::string::npos)
      << train.err;
}

}  // namespace
}  // namespace aspen::cli
