// Aspen under torchrun, the launcher of Kubernetes' PyTorchJob and most Slurm recipes
// (the venv's bin/torchrun, beside ASPEN_PYTHON): its agent serves the c10d store at
// MASTER_ADDR:MASTER_PORT, so every rank connects to it instead of rank 0 serving one.
// A single node and two c10d-rendezvous nodes on loopback train like `aspen launch`,
// and an attempt restarted on one node re-forms the group over the store the agent kept.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "aspen/parallel/launcher.h"
#include "parallel/binaries.h"
#include "parallel/rank_runs.h"
#include "run_command.h"

namespace aspen::parallel {
namespace {

namespace fs = std::filesystem;
using testing::quoted;
using testing::run_command;
using testing::tiny_rank_run;

const std::string kTorchrun = (fs::path(ASPEN_PYTHON).parent_path() / "torchrun").string();
const std::string kTorchrunPlacement = "placement.train.dp=2 placement.rollout.instances=2";

std::string torchrun_out_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("aspen_torchrun_" + name);
  fs::remove_all(dir);
  return dir.string();
}

// `torchrun --nnodes 2` node `node` of a c10d rendezvous at 127.0.0.1:port, one rank each.
std::string c10d_node(int port, int node, const std::string& extra = "") {
  return kTorchrun + " --nnodes 2 --nproc-per-node 1 --node-rank " + std::to_string(node) +
         " --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
         " --local-addr 127.0.0.1 " + extra + " --no-python ";
}

// The tiny 2-rank run through `aspen launch` (the reference) and through `launched`
// (a torchrun command line ending in "--no-python ... aspen train"); they train alike.
void expect_torchrun_trains_like_aspen_launch(
    const std::string& name, const std::function<std::string(const std::string&)>& torchrun_job) {
  ASSERT_TRUE(fs::exists(kTorchrun)) << kTorchrun << " (the venv of scripts/setup)";
  const std::string reference = torchrun_out_dir(name + "_launch");
  const std::string torchrun = torchrun_out_dir(name + "_torchrun");
  const auto launched =
      run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " + kAspen + " train " +
                  tiny_rank_run(kTorchrunPlacement) + " --out " + reference);
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  const auto result = run_command(torchrun_job(torchrun));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("cannot listen there"), std::string::npos) << result.output;
  // Rank 0 alone reports, as under aspen launch.
  const size_t first = result.output.find("== summary ==");
  ASSERT_NE(first, std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("== summary ==", first + 1), std::string::npos) << result.output;
  // Same samples, rewards and update; the weights within 1e-4 (which rank steals which
  // group depends on timing, so the gradient sums in another order).
  testing::expect_same_training(reference, torchrun, 2);
}

TEST(Torchrun, TwoRanksOnOneNodeTrainLikeAspenLaunch) {
  const int port = find_free_port();
  expect_torchrun_trains_like_aspen_launch("node", [&](const std::string& out) {
    return kTorchrun + " --nproc-per-node 2 --master-port " + std::to_string(port) +
           " --no-python " + kAspen + " train " + tiny_rank_run(kTorchrunPlacement) + " --out " +
           out;
  });
}

TEST(Torchrun, TwoNodesWithC10dRendezvousTrainLikeAspenLaunch) {
  // Two torchrun agents on this machine meet at the c10d endpoint; node 0's agent then
  // serves the store its workers share (MASTER_ADDR 127.0.0.1, --local-addr).
  const int port = find_free_port();
  expect_torchrun_trains_like_aspen_launch("nodes", [&](const std::string& out) {
    const std::string train =
        kAspen + " train " + tiny_rank_run(kTorchrunPlacement) + " --out " + out;
    return c10d_node(port, 1) + train + " & " + c10d_node(port, 0) + train +
           "; rc=$?; wait $!; other=$?; [ $rc -eq 0 ] && exit $other; exit $rc";
  });
}

TEST(Torchrun, RestartOnOneNodeReformsTheGroupOverTheStoreTheAgentKept) {
  // Attempt 1: rank 1 fails, its agent restarts it (TORCHELASTIC_RESTART_COUNT=1) and the
  // other agent, whose rank was healthy, restarts its own without counting (it stays 0).
  // Node 0's agent keeps serving the same store, which still holds attempt 1's keys.
  ASSERT_TRUE(fs::exists(kTorchrun)) << kTorchrun << " (the venv of scripts/setup)";
  const int port = find_free_port();
  const std::string marker = torchrun_out_dir("restart_marker");
  const std::string rank = kWorker + " fail_once " + quoted(marker);
  const std::string restarts = "--max-restarts 1";
  const auto result =
      run_command("ASPEN_RDZV_TIMEOUT_S=30 " + c10d_node(port, 1, restarts) + rank +
                  " & ASPEN_RDZV_TIMEOUT_S=30 " + c10d_node(port, 0, restarts) + rank +
                  "; rc=$?; wait $!; other=$?; [ $rc -eq 0 ] && exit $other; "
                  "exit $rc");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("rank 1 fails this attempt"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 0 of 2 ok (restart"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 of 2 ok (restart"), std::string::npos) << result.output;
  // The two nodes disagree on the restart count, so it cannot name the attempt's keys.
  EXPECT_NE(result.output.find("ok (restart 0)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("ok (restart 1)"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 60.0);
  fs::remove(marker);
}

TEST(Torchrun, AgentStoreNobodyServesIsNamedOnOneLine) {
  // TORCHELASTIC_USE_AGENT_STORE=True: rank 0 connects, it never serves the port itself.
  const std::string port = std::to_string(find_free_port());
  const auto result = run_command(
      "env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
      " TORCHELASTIC_USE_AGENT_STORE=True ASPEN_RDZV_TIMEOUT_S=2 " + kWorker + " rendezvous");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const std::string named = "rank 0 could not reach torchrun's agent store at 127.0.0.1:" + port;
  const size_t at = result.output.find(named);
  ASSERT_NE(at, std::string::npos) << result.output;
  const std::string line = result.output.substr(at, result.output.find('\n', at) - at);
  EXPECT_NE(line.find("(hint: is the torchrun agent"), std::string::npos) << line;
  EXPECT_LT(result.seconds, 15.0);
}

}  // namespace
}  // namespace aspen::parallel
