// run_sandboxed: one short-lived program, for tools that run model-written code (the
// python tool), under limits it cannot lift, and leaving nothing behind.
//
// What a run gets:
//   - a fresh directory (mkdtemp under SandboxLimits::temp_root) as its working directory,
//     HOME and TMPDIR, holding `files`; removed, with whatever the program wrote, when the
//     run ends, however it ends;
//   - rlimits set in the child before exec: RLIMIT_CPU (soft = cpu_seconds, which sends
//     SIGXCPU; hard one second later, SIGKILL), RLIMIT_AS (address space), RLIMIT_FSIZE
//     (bytes any file may grow to; SIGXFSZ beyond) and RLIMIT_CORE 0;
//   - a wall-clock timeout: the whole process group gets SIGKILL at the deadline, so
//     run_sandboxed returns within wall_seconds plus the time to reap (milliseconds);
//   - no network where the system allows it: the program runs under `unshare -n` (a new,
//     empty network namespace: no interfaces up, not even loopback), or `unshare -r -n`
//     (a user namespace too, for an unprivileged Aspen) when only that works. Which one
//     works is detected once per process (network_isolation()); where neither does (no
//     util-linux unshare, or namespaces forbidden, as in some containers), the program
//     runs WITH the host's network, the run says so (network_isolated = false) and a
//     warning is logged once. The other limits hold either way;
//   - stdin /dev/null; stdout and stderr into one pipe, interleaved as written; the first
//     max_output_bytes are kept and the rest counted and discarded while the program
//     runs on (so a program printing 10 MB is not blocked on a full pipe);
//   - a small environment of its own (PATH, HOME, TMPDIR, LANG=C.UTF-8, and
//     PYTHONUNBUFFERED/PYTHONDONTWRITEBYTECODE), none of Aspen's variables, and none of
//     Aspen's file descriptors (all closed before exec).
// Not contained: a program that leaves its process group (setsid) escapes the group kill,
// and RLIMIT_NPROC is not set (it counts every process of the user, Aspen's own included,
// and root ignores it); the wall timeout and the CPU limit still bound the program itself.
//
// Errors: aspen::Error when the run cannot start (no temp dir, program not found, fork
// fails); whatever the program does is reported in SandboxRun, never thrown.
// Thread safety: run_sandboxed may be called concurrently; each run is independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aspen/agent/imports.h"

namespace aspen::agent {

struct SandboxLimits {
  int cpu_seconds = 10;
  uint64_t address_space_bytes = uint64_t{1} << 30;  // 1 GiB
  uint64_t file_size_bytes = uint64_t{64} << 20;     // 64 MiB per file
  double wall_seconds = 10;
  size_t max_output_bytes = 8 << 10;  // 8 KiB back into the model's context
  bool isolate_network = true;
  std::string temp_root;  // "" for std::filesystem::temp_directory_path()
};

enum class NetworkIsolation { kNone, kUnshareNet, kUnshareUserNet };

// How this process isolates a sandboxed program's network, detected on first use by
// running `unshare -n true` and then `unshare -r -n true`. Thread-safe.
NetworkIsolation network_isolation();
std::string network_isolation_name(NetworkIsolation isolation);  // "none", "unshare -n", ...

struct SandboxRun {
  bool exited = false;  // ended by exit(); exit_code is its status
  int exit_code = -1;
  int signal = 0;  // the signal that ended it, when it did not exit (0 otherwise)
  bool timed_out = false;
  std::string output;       // the first max_output_bytes of stdout and stderr, raw bytes
  size_t output_bytes = 0;  // everything it printed, kept or not
  bool network_isolated = false;
  double wall_seconds = 0;
};

// In a forked child before exec: closes every file descriptor from `first` on (close_range
// where the kernel has it), so that none of Aspen's sockets or files reach the program.
// Async-signal-safe. Shared with the agent programs' runner (agent_process.h).
void close_descriptors_from(int first);

// argv[0] is an absolute path or a program found in PATH. `files`: {name, content} written
// into the run's directory first (names without '/').
SandboxRun run_sandboxed(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& files,
                         const SandboxLimits& limits);

}  // namespace aspen::agent
