// The resharder across processes: every layout change is exact (the worker compares
// each inference shard with the slice of the full weights, bit for bit).
#include <gtest/gtest.h>

#include <string>

#include "run_command.h"

namespace aspen::parallel {
namespace {

using testing::run_command;

struct ReshardCase {
  int dp, tp, infer, kv_heads;
};

std::string run_reshard(const ReshardCase& c) {
  const int world = c.dp * c.tp;
  const auto result =
      run_command(std::string(ASPEN_CLI_PATH) + " launch --nproc-per-node " +
                  std::to_string(world) + " --master-port 0 -- " + ASPEN_DIST_WORKER_PATH +
                  " reshard " + std::to_string(c.dp) + " " + std::to_string(c.tp) + " " +
                  std::to_string(c.infer) + " " + std::to_string(c.kv_heads));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(result.output.find("rank " + std::to_string(r) + " reshard ok"), std::string::npos)
        << result.output;
  }
  return result.output;
}

TEST(Reshard, TwoToOneGathersHalfOfTheModel) {
  const std::string output = run_reshard({1, 2, 1, 2});
  // Each rank receives the other's shards of every split tensor (norms stay local).
  EXPECT_EQ(output.find("bytes_moved 0\n"), std::string::npos) << output;
}

TEST(Reshard, OneToTwoSlicesLocallyAndMovesNothing) {
  const std::string output = run_reshard({2, 1, 2, 2});
  EXPECT_NE(output.find("rank 0 reshard ok tp_rank 0 bytes_moved 0"), std::string::npos)
      << output;
  EXPECT_NE(output.find("rank 1 reshard ok tp_rank 1 bytes_moved 0"), std::string::npos)
      << output;
}

TEST(Reshard, FourRanksWithReplicatedKvHeads) {
  run_reshard({1, 4, 2, 1});  // 1 kv head replicated on 4 training ranks -> TP 2
  run_reshard({2, 2, 4, 2});  // DP 2 x TP 2 -> TP 4 (split case across DP replicas)
}

}  // namespace
}  // namespace aspen::parallel
