#include "aspen/util/line_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "aspen/util/error.h"

extern char** environ;

namespace aspen {
namespace {

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

int milliseconds_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
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
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  // A process group of its own, so that stop() reaches what the shell started too
  // (a script's interpreter, its children), not only the shell.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, "/bin/sh", &actions, &attributes, const_cast<char**>(argv), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    throw Error(std::string("cannot start: ") + std::strerror(rc), "command `" + command_ + "`");
  }
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
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the whole group: the shell and everything it started
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  pending_.clear();
}

void LineProcess::fail(const std::string& problem) {
  stop();
  throw Error(problem, "command `" + command_ + "`");
}

std::vector<std::string> LineProcess::exchange(const std::vector<std::string>& requests,
                                               std::chrono::steady_clock::time_point deadline) {
  if (pid_ <= 0) start();
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
      fail("a reply line is longer than " + std::to_string(max_line_bytes_) + " bytes");
    }
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {to_child_, POLLOUT, 0}};
    const nfds_t count = written < out.size() ? 2 : 1;
    const int ready = poll(fds, count, milliseconds_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(std::string("poll: ") + std::strerror(errno));
    if (ready == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        fail("no reply to request " + std::to_string(replies.size() + 1) + " of " +
             std::to_string(requests.size()) + " before the timeout");
      }
      continue;
    }
    if (count == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(to_child_, out.data() + written, out.size() - written);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail("the process stopped reading its input after " + std::to_string(replies.size()) +
             " replies (" + std::strerror(errno) + ")");
      }
    }
    if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
      const ssize_t n = read(from_child_, buffer, sizeof buffer);
      if (n > 0) {
        pending_.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        fail("the process exited or closed its output after " + std::to_string(replies.size()) +
             " of " + std::to_string(requests.size()) + " replies");
      } else if (errno != EAGAIN && errno != EINTR) {
        fail(std::string("read: ") + std::strerror(errno));
      }
    }
  }
  return replies;
}

}  // namespace aspen
