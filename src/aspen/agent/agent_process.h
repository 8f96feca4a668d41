// run_agent_process: one run of a bring-your-own-agent program (agent_program.h), a
// shell command that talks to Aspen's OpenAI endpoint and prints its reward.
//
// Unlike run_sandboxed (sandboxed_process.h), which contains model-written code, an agent
// program is the user's own code: it runs in Aspen's working directory with Aspen's
// environment (plus `env`), with the network (it must reach the endpoint), without
// rlimits. What it shares with the sandbox is the discipline that keeps Aspen safe:
//   - `/bin/sh -c command` leads a process group of its own, and the whole group gets
//     SIGKILL at the deadline and when the program ends (whatever it left running goes
//     with it), before the leader is reaped, so the group id cannot have been reused;
//   - stdin gets `input` and is then closed, written while the output is read, so a
//     program that reads nothing or prints much never deadlocks against Aspen;
//   - stdout and stderr are read separately and bounded: the first max_stdout_bytes /
//     the LAST max_stderr_bytes are kept (an error is at the end of a traceback), the rest
//     counted and discarded while the program runs on, so 10 MB of output costs neither
//     memory nor a blocked pipe;
//   - none of Aspen's file descriptors reach it (close_descriptors_from): a leaked
//     listening socket would keep the endpoint's port bound after Aspen exits.
//   - the program gets SIGKILL if Aspen dies without cleaning up (PR_SET_PDEATHSIG).
// Not contained: a program that leaves its process group (setsid) escapes the kill, and
// so, when Aspen is killed with SIGKILL, does what the program started in the background.
//
// Errors: aspen::Error when the program cannot be started (pipe, fork); whatever it does
// is reported in AgentProcessRun, never thrown.
// Thread safety: may be called concurrently; each run is independent. The first call sets
// SIGPIPE to ignored if it is at its default (as LineProcess does): a program that exits
// without reading its input must not kill Aspen.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "aspen/agent/imports.h"

namespace aspen::agent {

struct AgentProcessLimits {
  double wall_seconds = 600;
  size_t max_stdout_bytes = size_t{64} << 10;
  size_t max_stderr_bytes = size_t{4} << 10;
  // Set (by another thread) while the program runs: it is killed as at the deadline,
  // within the poll interval (a run that ends kills the agents still running).
  const std::atomic<bool>* cancel = nullptr;
};

struct AgentProcessRun {
  bool exited = false;  // ended by exit() before the deadline; exit_code is its status
  int exit_code = -1;
  int signal = 0;       // the signal that ended it, when it did not exit
  bool timed_out = false;
  bool cancelled = false;  // killed because limits.cancel was set
  std::string out;      // the first max_stdout_bytes of stdout
  size_t out_bytes = 0; // everything it printed on stdout
  std::string err;      // the last max_stderr_bytes of stderr
  size_t err_bytes = 0;
  double wall_seconds = 0;
};

// `env`: NAME=VALUE entries that are added to Aspen's environment or replace its values.
// `on_first_line`: called once, on the calling thread, as soon as stdout holds a whole
// line (the agent's reward: its session ends there, agent_program.h), while the program
// may still run.
AgentProcessRun run_agent_process(const std::string& command, const std::string& input,
                                  const std::vector<std::string>& env,
                                  const AgentProcessLimits& limits,
                                  const std::function<void()>& on_first_line = {});

}  // namespace aspen::agent
