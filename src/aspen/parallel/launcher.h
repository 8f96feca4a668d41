// The `aspen launch` process supervisor (torchrun's job, without elasticity).
//
// launch(options) starts nproc_per_node children of `command` on this node, each
// with torchrun's environment:
//   RANK = node_rank * nproc_per_node + local rank, WORLD_SIZE = nproc_per_node * nnodes,
//   LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (= node_rank), MASTER_ADDR, MASTER_PORT,
//   ASPEN_RDZV_TIMEOUT_S (when rdzv_timeout_s > 0), and OMP_NUM_THREADS=1 unless already
//   set (as torchrun does: N ranks x all cores each would oversubscribe the machine).
// It then supervises them: the first child that exits non-zero or is killed by a
// signal is reported on stderr as
//   "aspen launch: rank K exited with code C" / "aspen launch: rank K killed by signal S (NAME)"
// and every other child gets SIGTERM, then SIGKILL after grace_period_s; launch returns
// within grace_period_s (+ a poll interval) of the first failure. SIGINT/SIGTERM sent to
// the launcher are forwarded the same way. A rank listed in tolerate_exit may fail
// without stopping the others (a rollout rank whose work the run regenerates
// elsewhere): its failure is reported as "aspen launch: rank K ...; the others go on"
// and does not count in the exit status (it was declared survivable). Once every
// other rank has exited 0, tolerated ranks still running grace_period_s later are
// stopped (SIGTERM, then SIGKILL after grace_period_s): the job is over. Each child runs in its own
// process group so the whole subtree of a rank (e.g. `sh -c ...`) is signalled. A launcher that
// dies without tearing down (SIGKILL, a crash) takes its ranks with it: each rank process gets
// SIGKILL from the kernel when the launcher exits (PR_SET_PDEATHSIG; processes a rank starts
// itself are that rank's to stop). Returns: 0 when
// every child exited 0; otherwise the first failure's exit code (128 + S for a signal, as shells
// report it), never 0. Errors: aspen::Error for invalid options (naming the option) or a failed
// fork; a command that cannot be executed makes that rank exit with code 127. Thread safety: call
// from the main thread only (installs signal handlers while running).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;         // 0: pick a free port (single node only)
  double rdzv_timeout_s = 0;       // 0: the ranks' default (DistEnv)
  double grace_period_s = 5;       // SIGTERM -> SIGKILL delay when tearing down
  std::vector<int> tolerate_exit;  // global ranks whose failure does not stop the job
  std::string stdout_path;         // non-empty: the ranks' stdout is appended there
  std::vector<std::string> command;

  void validate() const;  // aspen::Error naming the option
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// The variables set for local rank `local_rank` (master_port must already be resolved).
EnvVars rank_environment(const LaunchOptions& options, int local_rank);

// A free TCP port on this machine (bind to port 0); racy by nature but fine for a
// single-node job whose rank 0 binds it a moment later.
int find_free_port();

int launch(const LaunchOptions& options);

}  // namespace aspen::parallel
