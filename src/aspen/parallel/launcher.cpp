#include "aspen/parallel/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

extern char** environ;

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

volatile sig_atomic_t g_forwarded_signal = 0;

void on_signal(int sig) {
  g_forwarded_signal = sig;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
};

std::string describe_status(int rank, int status) {
  std::ostringstream out;
  out << "aspen launch: rank " << rank;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    out << " killed by signal " << sig << " (" << (name ? name : "?") << ")";
  } else {
    out << " exited with code " << WEXITSTATUS(status);
  }
  return out.str();
}

int exit_code_for(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  const int code = WEXITSTATUS(status);
  return code == 0 ? 1 : code;
}

// argv and envp of one rank, built before fork(): between fork and exec in a
// multi-threaded parent (torch may have started threads) only async-signal-safe calls
// are allowed, so the child must not allocate (no setenv, no std::string).
struct ExecPlan {
  int stdout_fd = -1;                // >= 0: the child's stdout
  std::vector<std::string> strings;  // owns argv then envp text
  std::vector<char*> argv;
  std::vector<char*> envp;
};

ExecPlan make_exec_plan(const LaunchOptions& options, int local_rank) {
  EnvVars overrides = rank_environment(options, local_rank);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) overrides.emplace_back("OMP_NUM_THREADS", "1");
  ExecPlan plan;
  for (const auto& arg : options.command) plan.strings.push_back(arg);
  const size_t argc = plan.strings.size();
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& kv : overrides) overridden = overridden || kv.first == key;
    if (!overridden) plan.strings.push_back(entry);
  }
  for (const auto& [key, value] : overrides) plan.strings.push_back(key + "=" + value);
  for (size_t i = 0; i < plan.strings.size(); ++i) {
    (i < argc ? plan.argv : plan.envp).push_back(plan.strings[i].data());
  }
  plan.argv.push_back(nullptr);
  plan.envp.push_back(nullptr);
  return plan;
}

// `launcher` is the launcher's pid, read before fork().
[[noreturn]] void exec_child(const ExecPlan& plan, pid_t launcher) {
  // Die with the launcher: a launcher that is SIGKILLed (or crashes) runs no tear-down,
  // and its ranks would otherwise run on unsupervised. The signal is sent when the
  // thread that forked exits, which is the launcher's main thread (launch() is called
  // from it). It survives exec (unless the command is set-user-ID) and covers the rank
  // process itself, not processes the rank starts in turn. If the launcher died before
  // prctl took effect we have already been re-parented: exit at once.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(128 + SIGKILL);
  // Own process group: the launcher signals the rank's whole subtree with kill(-pid).
  setpgid(0, 0);
  if (plan.stdout_fd >= 0) dup2(plan.stdout_fd, STDOUT_FILENO);
  execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
  static const char kMessage[] = "aspen launch: cannot execute the command (execvpe failed)\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(127);
}

// Reaps any exited child; returns false when none exited.
bool reap_one(std::vector<Child>& children, Child*& which, int& status) {
  const pid_t pid = waitpid(-1, &status, WNOHANG);
  if (pid <= 0) return false;
  for (auto& child : children) {
    if (child.pid == pid) {
      child.running = false;
      which = &child;
      return true;
    }
  }
  which = nullptr;  // not one of ours (should not happen)
  return true;
}

size_t count_running(const std::vector<Child>& children) {
  size_t n = 0;
  for (const auto& c : children) n += c.running ? 1 : 0;
  return n;
}

// Every rank not in `tolerated` has exited (0: a failure would have stopped them all),
// and some tolerated ones still run.
bool only_tolerated_left(const std::vector<Child>& children, const std::vector<int>& tolerated) {
  if (tolerated.empty()) return false;
  bool any_left = false;
  for (const auto& c : children) {
    if (!c.running) continue;
    if (std::find(tolerated.begin(), tolerated.end(), c.rank) == tolerated.end()) return false;
    any_left = true;
  }
  return any_left;
}

void signal_all(const std::vector<Child>& children, int sig) {
  for (const auto& c : children) {
    if (c.running) kill(-c.pid, sig);
  }
}

// SIGTERM, wait up to the grace period, then SIGKILL; reaps everything.
void tear_down(std::vector<Child>& children, double grace_period_s) {
  signal_all(children, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(grace_period_s * 1000));
  while (count_running(children) > 0 && std::chrono::steady_clock::now() < deadline) {
    Child* which = nullptr;
    int status = 0;
    if (!reap_one(children, which, status)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (count_running(children) == 0) return;
  signal_all(children, SIGKILL);
  for (auto& c : children) {
    if (c.running) {
      int status = 0;
      waitpid(c.pid, &status, 0);
      c.running = false;
    }
  }
}

}  // namespace

void LaunchOptions::validate() const {
  check_input(nproc_per_node >= 1, "must be >= 1",
              "--nproc-per-node " + std::to_string(nproc_per_node));
  check_input(nnodes >= 1, "must be >= 1", "--nnodes " + std::to_string(nnodes));
  check_input(node_rank >= 0 && node_rank < nnodes, "must be in [0, --nnodes)",
              "--node-rank " + std::to_string(node_rank));
  check_input(master_port >= 0 && master_port <= 65535, "must be in [0, 65535]",
              "--master-port " + std::to_string(master_port));
  check_input(master_port != 0 || nnodes == 1,
              "a free port (0) only works on a single node: other nodes cannot know it",
              "--master-port 0", "pass the same explicit --master-port on every node");
  check_input(!master_addr.empty(), "must not be empty", "--master-addr");
  check_input(rdzv_timeout_s >= 0, "must be >= 0", "--rdzv-timeout");
  check_input(grace_period_s >= 0, "must be >= 0", "--grace-period");
  check_input(!command.empty(), "no command to launch", "aspen launch",
              "usage: aspen launch --nproc-per-node N -- CMD ARGS...");
}

EnvVars rank_environment(const LaunchOptions& options, int local_rank) {
  EnvVars env = {
      {"RANK", std::to_string(options.node_rank * options.nproc_per_node + local_rank)},
      {"WORLD_SIZE", std::to_string(options.nproc_per_node * options.nnodes)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(options.master_port)},
  };
  if (options.rdzv_timeout_s > 0) {
    std::ostringstream seconds;
    seconds << options.rdzv_timeout_s;
    env.emplace_back("ASPEN_RDZV_TIMEOUT_S", seconds.str());
  }
  return env;
}

int find_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw Error(std::string("socket() failed: ") + std::strerror(errno), "--master-port 0");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  close(fd);
  if (!ok) throw Error(std::string("no free port: ") + std::strerror(err), "--master-port 0");
  return ntohs(addr.sin_port);
}

int launch(const LaunchOptions& input) {
  input.validate();
  LaunchOptions options = input;
  if (options.master_port == 0) options.master_port = find_free_port();

  // Opened before the signal handlers go in, so a failure leaves nothing to undo.
  int stdout_fd = -1;
  if (!options.stdout_path.empty()) {
    stdout_fd = open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    check_input(stdout_fd >= 0, std::string("cannot be opened: ") + std::strerror(errno),
                options.stdout_path, "the ranks' standard output goes there");
  }
  g_forwarded_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  std::fflush(nullptr);  // children inherit stdio buffers

  std::vector<Child> children;
  int result = 0;
  std::vector<ExecPlan> plans;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    plans.push_back(make_exec_plan(options, local));
    plans.back().stdout_fd = stdout_fd;
  }
  const pid_t launcher_pid = getpid();
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      tear_down(children, 0);
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      if (stdout_fd >= 0) close(stdout_fd);
      throw Error(std::string("fork failed: ") + std::strerror(err), "aspen launch");
    }
    if (pid == 0) {
      // Restore default dispositions before exec (handlers are reset by exec anyway,
      // but a child that fails before exec must not run ours).
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGTERM, &old_term, nullptr);
      exec_child(plans[local], launcher_pid);
    }
    setpgid(pid, pid);  // also from the parent: no race with the first kill(-pid)
    children.push_back({options.node_rank * options.nproc_per_node + local, pid, true});
  }

  // Since when only tolerated ranks run (they get a grace period to finish on their own).
  std::optional<std::chrono::steady_clock::time_point> tolerated_alone_since;
  bool non_tolerated_finished = false;  // a local rank not in tolerate_exit exited 0
  while (count_running(children) > 0) {
    if (g_forwarded_signal != 0) {
      std::fprintf(stderr, "aspen launch: received signal %d, stopping all ranks\n",
                   static_cast<int>(g_forwarded_signal));
      result = 128 + g_forwarded_signal;
      tear_down(children, options.grace_period_s);
      break;
    }
    Child* which = nullptr;
    int status = 0;
    if (!reap_one(children, which, status)) {
      // Only once a rank that is not tolerated has finished on this node: a node that
      // runs nothing but tolerated ranks (rollout ranks) cannot tell the job is over.
      if (!non_tolerated_finished || !only_tolerated_left(children, options.tolerate_exit)) {
        tolerated_alone_since.reset();
      } else if (!tolerated_alone_since) {
        tolerated_alone_since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - *tolerated_alone_since >
                 std::chrono::milliseconds(static_cast<int64_t>(options.grace_period_s * 1000))) {
        // The job is done; a tolerated rank still running a grace period later (e.g. a
        // rollout rank whose peer died inside a collective) must not keep it alive.
        std::fprintf(stderr, "aspen launch: every other rank has finished; stopping the rest\n");
        tear_down(children, options.grace_period_s);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (which == nullptr) continue;
    const std::vector<int>& tolerated = options.tolerate_exit;
    const bool is_tolerated =
        std::find(tolerated.begin(), tolerated.end(), which->rank) != tolerated.end();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      non_tolerated_finished = non_tolerated_finished || !is_tolerated;
      continue;
    }
    if (is_tolerated) {
      std::fprintf(stderr, "%s; the others go on\n", describe_status(which->rank, status).c_str());
      continue;
    }
    std::fprintf(stderr, "%s; stopping the other ranks\n",
                 describe_status(which->rank, status).c_str());
    result = exit_code_for(status);
    tear_down(children, options.grace_period_s);
    break;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (stdout_fd >= 0) close(stdout_fd);
  return result;
}

}  // namespace aspen::parallel
