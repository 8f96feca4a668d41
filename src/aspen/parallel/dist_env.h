// DistEnv: where this process sits in a multi-process job, read from torchrun's
// environment conventions (which `aspen launch` follows):
//   RANK          global rank, 0 <= RANK < WORLD_SIZE              (required)
//   WORLD_SIZE    number of ranks, >= 1                            (required)
//   LOCAL_RANK    rank on this machine, 0 <= LOCAL_RANK <= RANK    (default: RANK)
//   LOCAL_WORLD_SIZE  ranks on this machine, LOCAL_RANK < it <= WORLD_SIZE
//                 (default: unknown; equal to WORLD_SIZE means a single-node job)
//   MASTER_ADDR   host of rank 0's TCPStore                        (default: 127.0.0.1)
//   MASTER_PORT   its port, 1..65535                               (default: 29500)
//   TORCHELASTIC_USE_AGENT_STORE  "True": torchrun's agent already serves the store at
//                 MASTER_ADDR:MASTER_PORT (which must then be set), so rank 0 connects to
//                 it as every other rank does, as torch's env:// initialisation does;
//                 "False" or unset: rank 0 serves it                (default: unset)
// plus Aspen's timeouts (seconds, > 0, fractional allowed):
//   ASPEN_RDZV_TIMEOUT_S   how long rendezvous waits for every rank (default 300)
//   ASPEN_DIST_TIMEOUT_S   how long one collective may block, so a rank whose
//                          peer died mid-collective fails instead of hanging (default 60)
//
// Errors: aspen::Error naming the variable and its value for any malformed or
// out-of-range value (never a silent default for a value that is set but bad).
// Thread safety: pure functions; read_dist_env() reads the process environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 0;  // 0: LOCAL_WORLD_SIZE was not set
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun hosts the store
  std::chrono::milliseconds rendezvous_timeout{300'000};
  std::chrono::milliseconds collective_timeout{60'000};

  // Every rank runs on this machine: WORLD_SIZE is 1 or LOCAL_WORLD_SIZE == WORLD_SIZE.
  bool single_node() const { return world_size == 1 || local_world_size == world_size; }
};

// The address rank 0's rendezvous store (c10d TCPStore, which has no authentication)
// listens on and every rank connects to: 127.0.0.1 for a single-node job, whatever
// MASTER_ADDR says, so nothing off the machine can reach the store; MASTER_ADDR itself
// on several nodes (rank 0 binds that address only, not every interface). Under
// torchrun's agent store, MASTER_ADDR always: the agent chose where it listens.
std::string store_address(const DistEnv& env);

// Looks a variable up; returns nullptr when unset. Injectable for tests.
using EnvLookup = std::function<const char*(const char* name)>;

// True when WORLD_SIZE is set, i.e. the process was started as one rank of a job.
bool dist_env_present(const EnvLookup& lookup);
bool dist_env_present();

// Parses the variables above. Throws aspen::Error (see the header comment).
DistEnv read_dist_env(const EnvLookup& lookup);
DistEnv read_dist_env();  // from the process environment

}  // namespace aspen::parallel
