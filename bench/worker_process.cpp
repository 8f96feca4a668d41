#include "bench/worker_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include "aspen/util/error.h"
#include "bench/imports.h"

extern char** environ;

namespace aspen::bench {

WorkerProcess spawn_worker_process(const std::string& exe, std::vector<std::string> args) {
  int in_pipe[2], out_pipe[2];
  check_input(pipe2(in_pipe, O_CLOEXEC) == 0, "pipe2() failed", "worker " + exe);
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    throw Error("pipe2() failed", "worker " + exe);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the copies, so only fds 0 and 1 reach the child.
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  args.insert(args.begin(), exe);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  WorkerProcess worker;
  const int rc = posix_spawn(&worker.pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    throw Error("cannot start worker (posix_spawn: " + std::to_string(rc) + ")", exe);
  }
  worker.to = in_pipe[1];
  worker.from = out_pipe[0];
  return worker;
}

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  check_input(n > 0, "cannot resolve /proc/self/exe", "benchmark workers");
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace aspen::bench
