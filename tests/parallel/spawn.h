// Starting `aspen launch` in the background for tests that act on it while it runs
// (kill it, look at its ranks' sockets): fork/exec with a known pid, bounded waits, and a
// guard that never leaves a launcher behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace aspen::testing {

// Polls `done` every 20 ms for up to `seconds`; true once it held.
inline bool wait_until(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// No such process, or a zombie nobody has reaped yet (it runs no code any more).
inline bool process_gone(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');  // "PID (COMM) STATE ..."; COMM may hold spaces
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
}

// A child process running argv with stdout and stderr appended to log_path. The
// destructor SIGKILLs and reaps it if it still runs.
class Spawned {
 public:
  Spawned(const std::vector<std::string>& argv, const std::string& log_path) : log_(log_path) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot open " + log_path);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fd);
  }
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;
  ~Spawned() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  std::string log() const { return read_text(log_); }

  // Sends `sig` and waits up to `seconds` for the process to exit; true if it did.
  bool signal_and_reap(int sig, double seconds) {
    if (reaped_) return true;
    kill(pid_, sig);
    reaped_ = wait_until([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, seconds);
    return reaped_;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace aspen::testing
