// Runs a shell command for the multi-process tests: captures stdout+stderr, the exit
// status and the wall time.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace aspen::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed, as a shell reports it
  std::string output;
  double seconds = 0;
};

inline CommandResult run_command(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  // The subshell makes 2>&1 cover every command of a compound line.
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  CommandResult result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

inline std::string quoted(const std::string& text) { return "'" + text + "'"; }

}  // namespace aspen::testing
