// Pipeline parallelism over real processes: every rank of `aspen launch` runs the
// pp_check worker mode (worker/pp_modes.cpp): p2p messages with their shapes, then
// 3-layer models split into 2 or 3 stages that must compute the one-process loss and
// gradients. Cases share a launch because process start-up and rendezvous dominate.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_command.h"
#include "parallel/binaries.h"

namespace aspen::parallel {
namespace {

// Launches `ranks` workers running pp_check on `cases`; expects "rank R pp CASE ok"
// from every rank for every case.
void expect_cases_pass(int ranks, const std::vector<std::string>& cases) {
  std::string args;
  for (const auto& name : cases) args += " " + name;
  const auto result =
      testing::run_command(kAspen + " launch --nproc-per-node " + std::to_string(ranks) +
                           " --master-port 0 -- " + kWorker + " pp_check" + args);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const auto& name : cases) {
    for (int r = 0; r < ranks; ++r) {
      EXPECT_NE(result.output.find("rank " + std::to_string(r) + " pp " + name + " ok"),
                std::string::npos)
          << "case " << name << " rank " << r << "\n"
          << result.output;
    }
  }
}

// One packed micro-batch of 8 variable-length rows through 2 stages (layers {0, 1} and
// {2}): Qwen3 dense, and Qwen2 whose tied embedding sits on both stages and is kept one
// parameter by the gradient sum over first and last stage.
TEST(PipelineParallel, TwoStagesMatchOneProcessOnOneMicroBatchForQwen3AndTiedQwen2) {
  expect_cases_pass(2, {"p2p", "qwen3_dense:1", "qwen2_tied:1"});
}

// Four balanced micro-batches in 1F1B order, gradients accumulated over them.
TEST(PipelineParallel, TwoStagesOneFOneBOverFourMicroBatchesMatchOneProcess) {
  expect_cases_pass(2, {"qwen3_dense:4", "qwen2_tied:4"});
}

// Three stages of one layer each: the middle stage receives activations and sends them
// on, receives gradients and sends them back, and stays out of the tied-embedding sum.
TEST(PipelineParallel, ThreeStagesWithAMiddleStageMatchOneProcessOverFourMicroBatches) {
  expect_cases_pass(3, {"p2p", "qwen3_dense:4", "qwen2_tied:4"});
}

}  // namespace
}  // namespace aspen::parallel
