// aspen_dist_worker MODE ARGS...: one rank of a distributed test, started by
// `aspen launch` or directly with RANK/WORLD_SIZE/MASTER_* set. The modes live in
// worker/*_modes.cpp (worker_mode.h); each documents its arguments.
// Errors print "aspen_dist_worker: error: ..." and exit 1.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/process_group.h"
#include "aspen/util/error.h"
#include "worker_mode.h"

namespace {

int run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::vector<std::string> args(argv + std::min(argc, 2), argv + argc);
  std::string usage;
  for (const auto& candidate : aspen::testing::worker_modes()) {
    if (candidate.name == mode) {
      const aspen::parallel::DistEnv env = aspen::parallel::read_dist_env();
      aspen::parallel::ProcessGroupHandle group = aspen::parallel::init_process_group(env);
      return candidate.run(group, args);
    }
    usage += (usage.empty() ? "" : " | ") + candidate.usage;
  }
  throw aspen::Error("unknown mode", mode, usage);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aspen_dist_worker: error: %s\n", e.what());
    return 1;
  }
}
