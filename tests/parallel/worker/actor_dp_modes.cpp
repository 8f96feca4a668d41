// Data-parallel trainer rank programs (actor_dp_problem.h):
//   actor_dp KIND OUT UPDATES
//       KIND: actor | actor_seq | actor_bf16 | critic. Trains this rank's balanced share
//       of the global batch for UPDATES updates with the group as the DP group; saves
//       the final trainable parameters followed by the [UPDATES, K] metrics tensor to
//       OUT.rank<R> (torch::save) and prints "rank R: N buckets overlapped".
#include <cstdio>
#include <string>

#include "aspen/util/error.h"
#include "actor_dp_problem.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::parallel;
namespace {

int actor_dp(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 3, "expected KIND OUT UPDATES", "actor_dp");
  const DpKind kind = parse_dp_kind(args[0]);
  DpRun run = run_dp_rank(kind, group, std::stoi(args[2]));
  std::vector<torch::Tensor> saved = run.params;
  saved.push_back(run.metrics);
  torch::save(saved, args[1] + ".rank" + std::to_string(group.rank()));
  std::printf("rank %d: %lld buckets overlapped\n", group.rank(),
              static_cast<long long>(run.buckets_overlapped));
  return 0;
}

const RegisterWorkerMode kActorDp({"actor_dp", "actor_dp KIND OUT UPDATES", actor_dp});

}  // namespace
}  // namespace aspen::testing
