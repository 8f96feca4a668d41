#include "aspen/parallel/dist_env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

const char* process_getenv(const char* name) { return std::getenv(name); }

std::string where(const char* name) { return std::string("environment variable ") + name; }

const char* kHint = "aspen launch (or torchrun) sets RANK, WORLD_SIZE, LOCAL_RANK, "
                    "MASTER_ADDR and MASTER_PORT for every rank";

// Strict: the whole value must be a base-10 integer in [lo, hi].
int parse_int(const char* name, const char* value, long lo, long hi) {
  const std::string text = value;
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(text.c_str(), &end, 10);
  check_input(!text.empty() && end == text.c_str() + text.size() && errno == 0,
              std::string(name) + "='" + text + "' is not an integer", where(name), kHint);
  check_input(parsed >= lo && parsed <= hi,
              std::string(name) + "=" + text + " is out of range [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]",
              where(name), kHint);
  return static_cast<int>(parsed);
}

std::chrono::milliseconds parse_seconds(const EnvLookup& lookup, const char* name,
                                        std::chrono::milliseconds fallback) {
  const char* value = lookup(name);
  if (value == nullptr) return fallback;
  const std::string text = value;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text.c_str(), &end);
  check_input(!text.empty() && end == text.c_str() + text.size() && errno == 0 &&
                  std::isfinite(seconds) && seconds > 0,
              std::string(name) + "='" + text + "' is not a positive number of seconds",
              where(name));
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace

bool dist_env_present(const EnvLookup& lookup) { return lookup("WORLD_SIZE") != nullptr; }
bool dist_env_present() { return dist_env_present(process_getenv); }

DistEnv read_dist_env(const EnvLookup& lookup) {
  DistEnv env;
  const char* world = lookup("WORLD_SIZE");
  const char* rank = lookup("RANK");
  check_input(world != nullptr, "WORLD_SIZE is not set", where("WORLD_SIZE"), kHint);
  check_input(rank != nullptr, "RANK is not set", where("RANK"), kHint);
  env.world_size = parse_int("WORLD_SIZE", world, 1, 1 << 20);
  env.rank = parse_int("RANK", rank, 0, env.world_size - 1);
  env.local_rank = env.rank;
  if (const char* local = lookup("LOCAL_RANK")) {
    env.local_rank = parse_int("LOCAL_RANK", local, 0, env.rank);
  }
  if (const char* local_world = lookup("LOCAL_WORLD_SIZE")) {
    env.local_world_size = parse_int("LOCAL_WORLD_SIZE", local_world, 1, env.world_size);
    check_input(env.local_rank < env.local_world_size,
                "LOCAL_RANK=" + std::to_string(env.local_rank) +
                    " is not below LOCAL_WORLD_SIZE=" + std::to_string(env.local_world_size),
                where("LOCAL_WORLD_SIZE"), kHint);
  }
  if (const char* addr = lookup("MASTER_ADDR")) {
    check_input(*addr != '\0', "MASTER_ADDR is empty", where("MASTER_ADDR"), kHint);
    env.master_addr = addr;
  }
  if (const char* port = lookup("MASTER_PORT")) {
    env.master_port = parse_int("MASTER_PORT", port, 1, 65535);
  }
  if (const char* agent = lookup("TORCHELASTIC_USE_AGENT_STORE")) {
    // torchrun writes Python's str(bool); torch itself reads only "True" as true. Anything
    // else is refused rather than read as False, which would make rank 0 bind the port
    // the agent's store already holds.
    const std::string text = agent;
    check_input(text == "True" || text == "False",
                "TORCHELASTIC_USE_AGENT_STORE='" + text + "' is neither True nor False",
                where("TORCHELASTIC_USE_AGENT_STORE"), kHint);
    env.agent_store = text == "True";
  }
  if (env.agent_store) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      check_input(lookup(name) != nullptr,
                  std::string(name) + " is not set, but TORCHELASTIC_USE_AGENT_STORE=True says "
                  "torchrun's agent serves the store there",
                  where(name), kHint);
    }
  }
  env.rendezvous_timeout = parse_seconds(lookup, "ASPEN_RDZV_TIMEOUT_S", env.rendezvous_timeout);
  env.collective_timeout = parse_seconds(lookup, "ASPEN_DIST_TIMEOUT_S", env.collective_timeout);
  return env;
}

DistEnv read_dist_env() { return read_dist_env(process_getenv); }

std::string store_address(const DistEnv& env) {
  if (env.agent_store) return env.master_addr;
  return env.single_node() ? std::string("127.0.0.1") : env.master_addr;
}

}  // namespace aspen::parallel
