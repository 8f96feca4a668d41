#include "aspen/agent/sandboxed_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "aspen/agent/imports.h"
#include "aspen/agent/process_group_leader.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The program's absolute path: argv[0] as given when it has a '/', else the first
// executable of that name in PATH. Resolved before fork, so that the child only execs.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    check_input(access(name.c_str(), X_OK) == 0, "cannot execute " + name, "sandboxed process");
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    start = end + 1;
  }
  throw Error("program '" + name + "' not found in PATH", "sandboxed process");
}

// Everything exec needs, built before fork: after fork the child may only make
// async-signal-safe calls (the parent has other threads, one of which may hold malloc's lock).
struct ExecPlan {
  std::string path;
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  void seal() {
    for (std::string& arg : argv_storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (std::string& var : env_storage) envp.push_back(var.data());
    envp.push_back(nullptr);
  }
};

void set_limit(int resource, rlim_t soft, rlim_t hard) {
  const struct rlimit limit = {soft, hard};
  setrlimit(resource, &limit);
}

// The child's side of fork(): only async-signal-safe calls.
[[noreturn]] void exec_child(const ExecPlan& plan, const char* dir, int output_fd,
                             const SandboxLimits& limits) {
  setpgid(0, 0);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (const int signal_number : {SIGPIPE, SIGINT, SIGTERM, SIGXCPU, SIGXFSZ}) {
    sigaction(signal_number, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const rlim_t cpu = static_cast<rlim_t>(std::max(1, limits.cpu_seconds));
  set_limit(RLIMIT_CPU, cpu, cpu + 1);
  set_limit(RLIMIT_AS, limits.address_space_bytes, limits.address_space_bytes);
  set_limit(RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes);
  set_limit(RLIMIT_CORE, 0, 0);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (chdir(dir) != 0 || null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
      dup2(output_fd, STDOUT_FILENO) < 0 || dup2(output_fd, STDERR_FILENO) < 0) {
    _exit(127);
  }
  close_descriptors_from(3);
  execve(plan.path.c_str(), plan.argv.data(), plan.envp.data());
  static const char kMessage[] = "aspen: cannot execute the sandboxed program\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(127);
}

// Runs argv quietly (stdin, stdout and stderr /dev/null) and says whether it exited 0
// within five seconds: network_isolation()'s probe.
bool probe_succeeds(const std::vector<std::string>& argv) {
  ExecPlan plan;
  try {
    plan.path = find_program(argv[0]);
  } catch (const Error&) {
    return false;
  }
  plan.argv_storage = argv;
  plan.env_storage = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  plan.seal();
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0) {
      _exit(127);
    }
    close_descriptors_from(3);
    execve(plan.path.c_str(), plan.argv.data(), plan.envp.data());
    _exit(127);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

NetworkIsolation detect_network_isolation() {
  NetworkIsolation found = NetworkIsolation::kNone;
  if (probe_succeeds({"unshare", "-n", "true"})) {
    found = NetworkIsolation::kUnshareNet;
  } else if (probe_succeeds({"unshare", "-r", "-n", "true"})) {
    found = NetworkIsolation::kUnshareUserNet;
  }
  if (found == NetworkIsolation::kNone) {
    log_warn(
        "sandboxed tools run WITH network access: neither `unshare -n` nor `unshare -r -n` "
        "works here (util-linux missing, or namespaces not permitted)");
  } else {
    log_debug("sandboxed tools run without network (", network_isolation_name(found), ")");
  }
  return found;
}

std::string make_run_directory(const SandboxLimits& limits) {
  const fs::path root =
      limits.temp_root.empty() ? fs::temp_directory_path() : fs::path(limits.temp_root);
  std::string pattern = (root / "aspen-tool-XXXXXX").string();
  check_input(mkdtemp(pattern.data()) != nullptr,
              std::string("cannot create a temporary directory: ") + std::strerror(errno),
              root.string());
  return pattern;
}

// Removes the run's directory even where the program took its permissions away.
void remove_run_directory(const std::string& dir) {
  std::error_code error;
  fs::remove_all(dir, error);
  if (!error) return;
  for (auto it = fs::recursive_directory_iterator(
           dir, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_directory(error))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
  }
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, error);
  fs::remove_all(dir, error);
  if (error) log_warn("could not remove the sandbox directory ", dir, ": ", error.message());
}

// Reads what is in the pipe now; false at end of file.
bool read_available(int fd, const SandboxLimits& limits, SandboxRun& run) {
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      const size_t keep = std::min<size_t>(
          static_cast<size_t>(n),
          limits.max_output_bytes - std::min(limits.max_output_bytes, run.output.size()));
      run.output.append(buffer, keep);
      run.output_bytes += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return true;  // EAGAIN: nothing more for now
  }
}

}  // namespace

void close_descriptors_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
#endif
  struct rlimit files {};
  const rlim_t last = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                          ? std::min<rlim_t>(files.rlim_cur, 1 << 16)
                          : 1 << 16;
  for (rlim_t fd = first; fd < last; ++fd) close(static_cast<int>(fd));
}

std::string network_isolation_name(NetworkIsolation isolation) {
  switch (isolation) {
    case NetworkIsolation::kNone:
      return "none";
    case NetworkIsolation::kUnshareNet:
      return "unshare -n";
    case NetworkIsolation::kUnshareUserNet:
      return "unshare -r -n";
  }
  return "none";
}

NetworkIsolation network_isolation() {
  static const NetworkIsolation isolation = detect_network_isolation();
  return isolation;
}

SandboxRun run_sandboxed(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& files,
                         const SandboxLimits& limits) {
  check_input(!argv.empty(), "no program given", "sandboxed process");
  SandboxRun run;
  ExecPlan plan;
  const NetworkIsolation isolation =
      limits.isolate_network ? network_isolation() : NetworkIsolation::kNone;
  run.network_isolated = isolation != NetworkIsolation::kNone;
  // unshare(1) enters the new namespaces and then execs the program itself: same pid, so
  // the rlimits, the process group and the pipe carry over.
  if (isolation == NetworkIsolation::kUnshareNet) plan.argv_storage = {"unshare", "-n", "--"};
  if (isolation == NetworkIsolation::kUnshareUserNet)
    plan.argv_storage = {"unshare", "-r", "-n", "--"};
  plan.argv_storage.insert(plan.argv_storage.end(), argv.begin(), argv.end());
  if (run.network_isolated)
    plan.argv_storage[plan.argv_storage.size() - argv.size()] = find_program(argv[0]);
  plan.path = find_program(plan.argv_storage[0]);

  const std::string dir = make_run_directory(limits);
  struct DirectoryGuard {
    std::string dir;
    ~DirectoryGuard() { remove_run_directory(dir); }
  } guard{dir};
  for (const auto& [name, content] : files) {
    check_input(!name.empty() && name.find('/') == std::string::npos,
                "bad file name '" + name + "'", "sandboxed process");
    std::ofstream out(fs::path(dir) / name, std::ios::binary);
    out << content;
    check_input(out.good(), "cannot write " + name, dir);
  }
  const char* path_env = std::getenv("PATH");
  plan.env_storage = {
      std::string("PATH=") + (path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin"),
      "HOME=" + dir,
      "TMPDIR=" + dir,
      "LANG=C.UTF-8",
      "PYTHONUNBUFFERED=1",
      "PYTHONDONTWRITEBYTECODE=1"};
  plan.seal();

  int pipe_fds[2];
  check_input(pipe2(pipe_fds, O_CLOEXEC) == 0, std::string("pipe: ") + std::strerror(errno),
              "sandboxed process");
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw Error(std::string("fork: ") + std::strerror(errno), "sandboxed process");
  }
  if (pid == 0) exec_child(plan, dir.c_str(), pipe_fds[1], limits);
  close(pipe_fds[1]);
  // The parent's end of the output pipe, closed after the group is gone (`child` is
  // destroyed first).
  struct ParentEnd {
    int fd;
    ~ParentEnd() { close(fd); }
  } end{pipe_fds[0]};
  ProcessGroupLeader child(pid);
  const int fd = end.fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(limits.wall_seconds));
  bool open = true;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    // Short polls: the child's exit is noticed within a few milliseconds even while
    // something it started keeps the pipe open.
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 20));
    if (open) {
      struct pollfd readable = {fd, POLLIN, 0};
      if (poll(&readable, 1, wait_ms) > 0) open = read_available(fd, limits, run);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1, std::min(wait_ms, 2))));
    }
    if (child.exited()) break;
    if (Clock::now() >= deadline) {
      run.timed_out = true;
      break;
    }
  }
  // Whatever the program started and left behind in its group goes with it.
  const int status = child.kill_and_reap();
  if (open) read_available(fd, limits, run);
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
