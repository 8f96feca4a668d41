// A child process of a benchmark, started with posix_spawn and talking over two
// pipes: its stdin (we write lines) and its stdout (it writes lines). Its stderr is
// ours. The pipes are close-on-exec in this process, so a worker started later does
// not inherit another worker's ends (which would keep that worker's stdin open after
// we close it, and hide its end-of-file).
// Errors: aspen::Error when a pipe or the spawn fails, naming the executable.
// Thread safety: none; one owner.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct WorkerProcess {
  pid_t pid = -1;
  int to = -1;    // its stdin (write end)
  int from = -1;  // its stdout (read end)
};

// Starts `exe args...` with the current environment.
WorkerProcess spawn_worker_process(const std::string& exe, std::vector<std::string> args);

// This executable's path (/proc/self/exe resolved): benchmarks re-run themselves.
std::string self_executable();

}  // namespace aspen::bench
