// Helpers for tests that run the `aspen` executable (ASPEN_CLI_PATH) and other
// programs as a user would: through a shell, with files for stdin/stdout.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace aspen::testing {

struct CommandResult {
  int exit_code;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A scratch directory unique to the running test, emptied on its first call.
inline std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      ::testing::TempDir() + "/aspen_" + info->test_suite_name() + "_" + info->name();
  static std::string emptied_for;  // emptied on the test's first call only
  if (emptied_for != dir) {
    std::filesystem::remove_all(dir);
    emptied_for = dir;
  }
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `command` via /bin/sh with stdin from `stdin_text`; captures stdout/stderr.
inline CommandResult run_command(const std::string& command, const std::string& stdin_text = "") {
  static int calls = 0;
  const std::string dir = ::testing::TempDir() + "/aspen_run_" + std::to_string(::getpid()) + "_" +
                          std::to_string(calls++);
  std::filesystem::create_directories(dir);
  write_text(dir + "/stdin", stdin_text);
  const std::string full =
      command + " < " + dir + "/stdin > " + dir + "/stdout 2> " + dir + "/stderr";
  const int status = std::system(full.c_str());
  CommandResult result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir + "/stdout"),
                       read_text(dir + "/stderr")};
  std::filesystem::remove_all(dir);
  return result;
}

inline std::string aspen_cli() {
  return ASPEN_CLI_PATH;
}

}  // namespace aspen::testing
