#include "aspen/util/line_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "aspen/util/error.h"
#include "aspen/util/ignore_sigpipe.h"

namespace aspen {
namespace {

int milliseconds_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
}

// The process group's first process: a shell that starts the command (its stdin and
// stdout the pipes at fds 4 and 5) and then waits for end of file on fd 3, the read end
// of a pipe whose only writer is Aspen. Aspen never writes to it, so the read returns
// when Aspen exits, however it exits (kill -9 runs no tear-down), and the shell then
// SIGKILLs its whole group: the command, whatever `sh -c` forked (dash does not exec a
// simple command) and what the script started in turn. PR_SET_PDEATHSIG alone would
// reach one process and fire when the forking *thread* ends; the pipe has neither
// limit nor a race (a write end closed before the read began still gives EOF).
// The command is $0, passed as an argument: no quoting of user text.
constexpr const char* kWatcherScript =
    "/bin/sh -c \"$0\" <&4 >&5 3<&- 4<&- 5<&- &\n"
    "exec 4<&- 5<&-\n"
    "read _ <&3\n"
    "kill -9 0\n";

// The child's side of fork(): only async-signal-safe calls (the parent has threads).
[[noreturn]] void exec_watcher(const char* const* argv, int stdin_fd, int stdout_fd,
                               int life_fd) {
  // A process group of its own, so that stop() and the watcher reach the command and
  // everything it started, and nothing else.
  setpgid(0, 0);
  // Not Aspen's signal state: SIGPIPE ignored and a worker thread's blocked signals
  // would otherwise survive exec.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // To fds 3, 4, 5 by way of copies above them (an fd may already be 3, 4 or 5); the
  // copies are close-on-exec, dup2's targets are not.
  const int life = fcntl(life_fd, F_DUPFD_CLOEXEC, 10);
  const int in = fcntl(stdin_fd, F_DUPFD_CLOEXEC, 10);
  const int out = fcntl(stdout_fd, F_DUPFD_CLOEXEC, 10);
  if (life < 0 || in < 0 || out < 0 || dup2(life, 3) < 0 || dup2(in, 4) < 0 ||
      dup2(out, 5) < 0) {
    _exit(127);
  }
  execv("/bin/sh", const_cast<char* const*>(argv));
  static const char kMessage[] = "aspen: cannot execute /bin/sh\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

LineProcess::LineProcess(std::string command, size_t max_line_bytes)
    : command_(std::move(command)), max_line_bytes_(max_line_bytes) {
  check_input(!command_.empty(), "empty command", "child process");
  ignore_sigpipe_once();
}

LineProcess::~LineProcess() { stop(); }

void LineProcess::start() {
  int in[2];   // child's stdin
  int out[2];  // child's stdout
  if (pipe2(in, O_CLOEXEC) != 0) throw Error(std::strerror(errno), "pipe for `" + command_ + "`");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    throw Error(std::strerror(errno), "pipe for `" + command_ + "`");
  }
  int life[2];  // Aspen holds the write end until it exits (see kWatcherScript)
  if (pipe2(life, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    throw Error(std::strerror(errno), "pipe for `" + command_ + "`");
  }
  const char* argv[] = {"/bin/sh", "-c", kWatcherScript, command_.c_str(), nullptr};
  const pid_t pid = fork();
  if (pid == 0) exec_watcher(argv, in[0], out[1], life[0]);
  const int fork_error = errno;
  if (pid > 0) setpgid(pid, pid);  // also from here: no race with stop()'s kill(-pid)
  close(in[0]);
  close(out[1]);
  close(life[0]);
  if (pid < 0) {
    for (int fd : {in[1], out[0], life[1]}) close(fd);
    throw Error(std::string("cannot start: ") + std::strerror(fork_error),
                "command `" + command_ + "`");
  }
  life_ = life[1];
  pid_ = pid;
  to_child_ = in[1];
  from_child_ = out[0];
  fcntl(to_child_, F_SETFL, fcntl(to_child_, F_GETFL) | O_NONBLOCK);
  fcntl(from_child_, F_SETFL, fcntl(from_child_, F_GETFL) | O_NONBLOCK);
  pending_.clear();
  ++starts_;
}

void LineProcess::stop() {
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  if (life_ >= 0) close(life_);
  to_child_ = from_child_ = life_ = -1;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the whole group: the shell and everything it started
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  pending_.clear();
}

void LineProcess::fail(Failure failure, const std::string& problem) {
  stop();
  failure_ = failure;
  throw Error(problem, "command `" + command_ + "`");
}

void LineProcess::fail_unrequested(const std::string& problem) {
  stop();
  failure_ = Failure::kUnrequested;
  throw UnrequestedOutput(problem, "command `" + command_ + "`");
}

std::vector<std::string> LineProcess::exchange(const std::vector<std::string>& requests,
                                               std::chrono::steady_clock::time_point deadline) {
  failure_ = Failure::kNone;
  if (pid_ <= 0) start();
  // Whatever the child printed since the last batch answers no request sent: refuse it
  // rather than let it be read as this batch's first replies (a shift of every score).
  check_no_unrequested_output(std::chrono::milliseconds(0), 0);
  std::string out;
  for (const std::string& request : requests) {
    check_input(request.find('\n') == std::string::npos, "a request holds a newline",
                "command `" + command_ + "`");
    out += request;
    out += '\n';
  }
  size_t written = 0;
  std::vector<std::string> replies;
  replies.reserve(requests.size());
  char buffer[65536];
  while (replies.size() < requests.size()) {
    // Take the complete lines already buffered.
    size_t newline;
    while (replies.size() < requests.size() &&
           (newline = pending_.find('\n')) != std::string::npos) {
      replies.push_back(pending_.substr(0, newline));
      pending_.erase(0, newline + 1);
    }
    if (replies.size() == requests.size()) break;
    if (pending_.size() > max_line_bytes_) {
      fail(Failure::kLineTooLong,
           "a reply line is longer than " + std::to_string(max_line_bytes_) + " bytes");
    }
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {to_child_, POLLOUT, 0}};
    const nfds_t count = written < out.size() ? 2 : 1;
    const int ready = poll(fds, count, milliseconds_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(Failure::kOther, std::string("poll: ") + std::strerror(errno));
    if (ready == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        fail(Failure::kTimeout, "no reply to request " + std::to_string(replies.size() + 1) +
                                    " of " + std::to_string(requests.size()) +
                                    " before the timeout");
      }
      continue;
    }
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(to_child_, out.data() + written, out.size() - written);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail(Failure::kExited, "the process stopped reading its input after " +
                                   std::to_string(replies.size()) + " replies (" +
                                   std::strerror(errno) + ")");
      }
    }
    if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
      const ssize_t n = read(from_child_, buffer, sizeof buffer);
      if (n > 0) {
        pending_.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        fail(Failure::kExited, "the process exited or closed its output after " +
                                   std::to_string(replies.size()) + " of " +
                                   std::to_string(requests.size()) + " replies");
      } else if (errno != EAGAIN && errno != EINTR) {
        fail(Failure::kOther, std::string("read: ") + std::strerror(errno));
      }
    }
  }
  // As many replies as requests, yet some requests unsent or lines left over: the child
  // prints more than one line per request.
  if (written < out.size()) {
    fail_unrequested("printed " + std::to_string(requests.size()) +
                     " reply lines before it was sent all " + std::to_string(requests.size()) +
                     " requests; print exactly one reply line per request line");
  }
  check_no_unrequested_output(kQuietAfterReplies, requests.size());
  return replies;
}

void LineProcess::check_no_unrequested_output(std::chrono::milliseconds wait, size_t requests) {
  if (pid_ <= 0) return;
  const auto until = std::chrono::steady_clock::now() + wait;
  char buffer[65536];
  while (pending_.empty()) {
    pollfd fd = {from_child_, POLLIN, 0};
    const int ready = poll(&fd, 1, milliseconds_until(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = read(from_child_, buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      break;  // it exited: the next exchange finds out and restarts it
    }
  }
  if (pending_.empty()) return;
  const std::string first = pending_.substr(0, std::min<size_t>(pending_.find('\n'), 200));
  const std::string when = requests > 0 ? "after the " + std::to_string(requests) +
                                               " replies to a batch of " + std::to_string(requests)
                                         : std::string("between batches");
  fail_unrequested("printed a line that answers no request (" + when + "): " + first +
                   "; print exactly one reply line per request line");
}

}  // namespace aspen
