// Expert parallelism over real processes: every rank of `aspen launch` runs the
// ep_check worker mode (worker/ep_modes.cpp): the all-to-all on known rows, then a
// Qwen3-MoE split over the ranks' experts against the one-process model - forward,
// every gradient and two optimizer steps, each rank on its own tokens - and the rollout
// engine over it generating the one-process model's tokens, with the tokens exchanged
// by all-to-all and, as a rollout instance runs it, replicated on every rank; the
// experts split by EP over a TP group whose attention is split by heads; and the actor's
// update with routing replay (R3) equal to one process replaying the same choices.
#include <gtest/gtest.h>

#include <string>

#include "parallel/binaries.h"
#include "run_command.h"

namespace aspen::parallel {
namespace {

void expect_ep_check_passes(int ranks) {
  const auto result =
      testing::run_command(kAspen + " launch --nproc-per-node " + std::to_string(ranks) +
                           " --master-port 0 -- " + kWorker + " ep_check");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* name : {"all_to_all", "model", "rollout", "replicated_rollout", "tensor_times_expert", "actor", "actor_replay"}) {
    for (int r = 0; r < ranks; ++r) {
      EXPECT_NE(result.output.find("rank " + std::to_string(r) + " ep " + name + " ok"),
                std::string::npos)
          << name << " rank " << r << "\n"
          << result.output;
    }
  }
}

TEST(ExpertParallel, TwoRanksEqualOneProcessForwardBackwardAndTwoSteps) {
  expect_ep_check_passes(2);
}

// One expert per rank: every token's top-2 crosses ranks.
TEST(ExpertParallel, FourRanksEqualOneProcessForwardBackwardAndTwoSteps) {
  expect_ep_check_passes(4);
}

}  // namespace
}  // namespace aspen::parallel
