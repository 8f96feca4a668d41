// Multi-process tests on loopback: every rank is an aspen_dist_worker process,
// started through `aspen launch` or directly with the rank environment.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "aspen/parallel/launcher.h"
#include "run_command.h"
#include "worker/dp_problem.h"
#include "parallel/binaries.h"

namespace aspen::parallel {
namespace {

using testing::run_command;


std::string rank_env(int rank, int world, int port, const std::string& extra = "") {
  return "env RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + extra + " ";
}

TEST(Distributed, TwoRanksRendezvous) {
  const auto result =
      run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " + kWorker +
                  " rendezvous");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("rank 0 of 2 ok"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 of 2 ok"), std::string::npos) << result.output;
}

TEST(Distributed, MaxAllGatherAndSubgroups) {
  const auto result = run_command(kAspen + " launch --nproc-per-node 4 --master-port 0 -- " +
                                  kWorker + " collectives");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(result.output.find("rank " + std::to_string(r) + " collectives ok"),
              std::string::npos)
        << result.output;
  }
}

std::vector<torch::Tensor> dp1_reference(int steps) {
  auto nothing = [](const NamedParams&) {};
  return testing::run_dp_problem(0, 1, steps, [](int64_t n) { return n; }, nothing, nothing);
}

// Runs the DP problem on 2 ranks through aspen launch; checks both ranks against DP = 1.
void check_dp2_matches_dp1(bool overlap) {
  const int steps = 5;
  const std::filesystem::path out = std::filesystem::temp_directory_path() /
                                    ("aspen_dp_" + std::to_string(getpid()));
  // bucket_mb tiny: one bucket per parameter, so the multi-bucket path is exercised.
  const auto result = run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " +
                                  kWorker + " dp_train " + out.string() + " " +
                                  std::to_string(steps) + " 0.0001 " + (overlap ? "1" : "0"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // 4 parameters -> 4 buckets; with overlap, the hooks launch all 4 in each of 5 steps.
  const std::string launched = overlap ? "20" : "0";
  EXPECT_NE(result.output.find("rank 0: 4 buckets, " + launched + " launched during backward"),
            std::string::npos)
      << result.output;

  const std::vector<torch::Tensor> reference = dp1_reference(steps);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<torch::Tensor> params;
    const std::string path = out.string() + ".rank" + std::to_string(rank);
    torch::load(params, path);
    std::filesystem::remove(path);
    ASSERT_EQ(params.size(), reference.size());
    for (size_t i = 0; i < params.size(); ++i) {
      // Same global batch, same AdamW: equal up to fp32 summation order.
      EXPECT_TRUE(torch::allclose(params[i], reference[i], 1e-5, 1e-6))
          << "rank " << rank << " parameter " << i << " max diff "
          << (params[i] - reference[i]).abs().max().item<float>();
    }
  }
  // Training moved the parameters, so the comparison is not vacuous.
  EXPECT_FALSE(torch::allclose(dp1_reference(0)[0], reference[0], 1e-3, 1e-3));
}

TEST(Distributed, TwoNodesOnLoopbackFormOneGroup) {
  // Two launchers (nodes) with 2 ranks each meet at the same explicit port.
  const std::string port = std::to_string(find_free_port());
  const std::string node = kAspen + " launch --nproc-per-node 2 --nnodes 2 --master-port " +
                           port + " --rdzv-timeout 10 --node-rank ";
  const auto result = run_command(node + "1 -- " + kWorker + " rendezvous & " + node + "0 -- " +
                                  kWorker + " rendezvous; rc=$?; wait; exit $rc");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(result.output.find("rank " + std::to_string(r) + " of 4 ok"), std::string::npos)
        << result.output;
  }
}

TEST(Distributed, DataParallelTwoRanksMatchesOneProcess) { check_dp2_matches_dp1(false); }

TEST(Distributed, DataParallelOverlappedWithBackwardMatchesOneProcess) {
  check_dp2_matches_dp1(true);
}

TEST(Distributed, KilledRankStopsAllOthersThroughLaunch) {
  // Rank 2 SIGKILLs itself mid-loop; ranks 0, 1, 3 are inside all-reduces.
  const auto result =
      run_command(kAspen + " launch --nproc-per-node 4 --master-port 0 -- " + kWorker +
                  " allreduce_loop 2 20");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("aspen launch: rank 2 killed by signal 9"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 60.0);
}

TEST(Distributed, RankWhosePeerDiedFailsOnItsOwn) {
  // No launcher: rank 0 must notice by itself (Gloo error or ASPEN_DIST_TIMEOUT_S).
  const int port = find_free_port();
  const auto result = run_command(
      "(" + rank_env(1, 2, port, "ASPEN_RDZV_TIMEOUT_S=10") + kWorker +
      " allreduce_loop 1 10 &) ; " +
      rank_env(0, 2, port, "ASPEN_RDZV_TIMEOUT_S=10 ASPEN_DIST_TIMEOUT_S=5") + kWorker +
      " allreduce_loop 1 10");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("allreduce failed on rank 0"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 20.0);
}

TEST(Distributed, StalledPeerFailsWithinTheCollectiveTimeout) {
  // Rank 1 freezes itself (SIGSTOP) mid-loop: its sockets stay open, so only the
  // collective timeout can save rank 0. The shell kills the frozen rank afterwards.
  const int port = find_free_port();
  const auto result = run_command(
      rank_env(1, 2, port, "ASPEN_RDZV_TIMEOUT_S=10") + kWorker +
      " allreduce_loop 1 10 stop & P1=$!; " +
      rank_env(0, 2, port, "ASPEN_RDZV_TIMEOUT_S=10 ASPEN_DIST_TIMEOUT_S=2") + kWorker +
      " allreduce_loop 1 10 stop; rc=$?; kill -KILL $P1; exit $rc");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("allreduce failed on rank 0"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Timed out"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 15.0);
}

TEST(Distributed, MissingRankIsARendezvousTimeout) {
  const int port = find_free_port();
  const auto result = run_command(rank_env(0, 2, port, "ASPEN_RDZV_TIMEOUT_S=2") + kWorker +
                                  " rendezvous");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("rank 1 never arrived within 2 s"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 15.0);
}

TEST(Distributed, UnreachableRankZeroIsARendezvousTimeout) {
  const int port = find_free_port();
  const auto result = run_command(rank_env(1, 2, port, "ASPEN_RDZV_TIMEOUT_S=2") + kWorker +
                                  " rendezvous");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("rank 1 could not reach rank 0's store"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 15.0);
}

}  // namespace
}  // namespace aspen::parallel
