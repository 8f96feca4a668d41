#include "aspen/agent/agent_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "aspen/agent/imports.h"
#include "aspen/agent/process_group_leader.h"
#include "aspen/agent/sandboxed_process.h"
#include "aspen/util/error.h"
#include "aspen/util/ignore_sigpipe.h"

extern char** environ;

namespace aspen::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Aspen's environment with `overrides` added or replacing variables of the same name,
// built before fork (the child may only make async-signal-safe calls).
std::vector<std::string> child_environment(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string var = *entry;
    vars[var.substr(0, var.find('='))] = var;
  }
  for (const std::string& var : overrides) {
    check_input(var.find('=') != std::string::npos && var.front() != '=',
                "an environment entry must be NAME=VALUE", var);
    vars[var.substr(0, var.find('='))] = var;
  }
  std::vector<std::string> env;
  for (auto& [name, var] : vars) env.push_back(std::move(var));
  return env;
}

// One output pipe: what is kept of it and how much came.
struct Sink {
  int fd = -1;
  bool open = true;
  bool keep_tail = false;  // stderr: the last bytes matter (a traceback's end)
  size_t cap = 0;
  std::string* kept = nullptr;
  size_t* bytes = nullptr;

  void take(const char* data, size_t n) {
    *bytes += n;
    if (!keep_tail) {
      kept->append(data, std::min(n, cap - std::min(cap, kept->size())));
      return;
    }
    kept->append(data, n);
    if (kept->size() > 2 * cap + 65536) kept->erase(0, kept->size() - cap);
  }
  // Reads what is there now; closes the sink at end of file.
  void drain() {
    char buffer[65536];
    while (open) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n > 0) {
        take(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        open = false;
      } else if (errno != EINTR) {
        return;  // EAGAIN: nothing more for now
      }
    }
  }
  void finish() {
    if (keep_tail && kept->size() > cap) kept->erase(0, kept->size() - cap);
  }
};

}  // namespace

AgentProcessRun run_agent_process(const std::string& command, const std::string& input,
                                  const std::vector<std::string>& env,
                                  const AgentProcessLimits& limits,
                                  const std::function<void()>& on_first_line) {
  ignore_sigpipe_once();
  std::vector<std::string> argv_storage = {"/bin/sh", "-c", command};
  std::vector<std::string> env_storage = child_environment(env);
  std::vector<char*> argv;
  std::vector<char*> envp;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (std::string& var : env_storage) envp.push_back(var.data());
  envp.push_back(nullptr);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  check_input(pipe2(in_pipe, O_CLOEXEC) == 0, std::string("pipe: ") + std::strerror(errno),
              "agent program");
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    for (int fd : {in_pipe[0], in_pipe[1]}) close(fd);
    throw Error(std::string("pipe: ") + std::strerror(error), "agent program");
  }
  AgentProcessRun run;
  const auto start = Clock::now();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    throw Error(std::string("fork: ") + std::strerror(error), "agent program");
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls from here to exec.
    setpgid(0, 0);
    // Killed if Aspen dies without its own clean-up (kill -9). The signal follows the
    // forking thread, which waits in this function for as long as the program runs.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // Aspen died before prctl took effect
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (const int signal_number : {SIGPIPE, SIGINT, SIGTERM}) {
      sigaction(signal_number, &default_action, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dup2(in_pipe[0], STDIN_FILENO) < 0 || dup2(out_pipe[1], STDOUT_FILENO) < 0 ||
        dup2(err_pipe[1], STDERR_FILENO) < 0) {
      _exit(127);
    }
    close_descriptors_from(3);
    execve(argv_storage[0].c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // The parent's ends (the program's stdin, stdout, stderr), closed after the group is
  // gone: `child` is destroyed first.
  struct ParentEnds {
    int fds[3];
    ~ParentEnds() {
      for (int fd : fds) {
        if (fd >= 0) close(fd);
      }
    }
  } ends{{in_pipe[1], out_pipe[0], err_pipe[0]}};
  ProcessGroupLeader child(pid);
  for (int fd : ends.fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  Sink out{ends.fds[1], true, false, limits.max_stdout_bytes, &run.out, &run.out_bytes};
  Sink err{ends.fds[2], true, true, limits.max_stderr_bytes, &run.err, &run.err_bytes};
  size_t written = 0;
  bool line_seen = false;
  const auto check_first_line = [&] {
    if (line_seen || run.out.find('\n') == std::string::npos) return;
    line_seen = true;
    if (on_first_line) on_first_line();
  };
  if (input.empty()) {
    close(ends.fds[0]);
    ends.fds[0] = -1;
  }

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(limits.wall_seconds));
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    // Short polls: the program's exit is noticed within milliseconds even while something
    // it started keeps a pipe open.
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 20));
    std::vector<pollfd> fds;
    if (out.open) fds.push_back({out.fd, POLLIN, 0});
    if (err.open) fds.push_back({err.fd, POLLIN, 0});
    if (ends.fds[0] >= 0) fds.push_back({ends.fds[0], POLLOUT, 0});
    if (fds.empty()) {
      usleep(static_cast<useconds_t>(std::max(1, std::min(wait_ms, 2)) * 1000));
    } else if (poll(fds.data(), fds.size(), wait_ms) > 0) {
      out.drain();
      err.drain();
      check_first_line();
      if (ends.fds[0] >= 0) {
        const ssize_t n = write(ends.fds[0], input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<size_t>(n);
        // All written, or the program closed its stdin (EPIPE): its input ends here.
        if (written == input.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          close(ends.fds[0]);
          ends.fds[0] = -1;
        }
      }
    }
    if (child.exited()) break;
    if (Clock::now() >= deadline) {
      run.timed_out = true;
      break;
    }
    if (limits.cancel != nullptr && limits.cancel->load()) {
      run.cancelled = true;
      break;
    }
  }
  const int status = child.kill_and_reap();
  out.drain();
  err.drain();
  err.finish();
  check_first_line();
  run.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status) && !run.timed_out) {
    run.exited = true;
    run.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
  }
  return run;
}

}  // namespace aspen::agent
