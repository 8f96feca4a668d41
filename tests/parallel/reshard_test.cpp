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
  int pp = 1;
  bool tied = false;
};

std::string run_reshard(const ReshardCase& c) {
  const int world = c.dp * c.pp * c.tp;
  const std::string stages =
      c.pp > 1 ? " " + std::to_string(c.pp) + (c.tied ? " 1" : " 0") : std::string();
  const auto result =
      run_command(std::string(ASPEN_CLI_PATH) + " launch --nproc-per-node " +
                  std::to_string(world) + " --master-port 0 -- " + ASPEN_DIST_WORKER_PATH +
                  " reshard " + std::to_string(c.dp) + " " + std::to_string(c.tp) + " " +
                  std::to_string(c.infer) + " " + std::to_string(c.kv_heads) + stages);
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

// Pipeline stages: every rank ends with its inference shard of EVERY layer, and the
// worker checks bytes_moved equals the placement's count (only what inference needs).
TEST(Reshard, TwoStagesToOneInferenceRankGatherTheWholeModel) {
  run_reshard({1, 1, 1, 2, 2, /*tied=*/false});
  run_reshard({1, 1, 1, 2, 2, /*tied=*/true});  // the last stage keeps its embedding copy
}

TEST(Reshard, TwoStagesToTwoInferenceRanksExchangeTheirShardOnly) {
  // Each stage slices the other stage's inference shard from its own layers.
  const std::string output = run_reshard({1, 1, 2, 2, 2, /*tied=*/true});
  EXPECT_NE(output.find("rank 0 reshard ok tp_rank 0"), std::string::npos) << output;
  EXPECT_NE(output.find("rank 1 reshard ok tp_rank 1"), std::string::npos) << output;
}

TEST(Reshard, TwoStagesTimesTwoTpGatherThenExchange) {
  run_reshard({1, 2, 1, 2, 2, /*tied=*/true});  // 4 ranks: TP gather, then the stages
}

}  // namespace
}  // namespace aspen::parallel
