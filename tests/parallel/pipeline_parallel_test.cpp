// Pipeline parallelism over real processes: every rank of `aspen launch` runs the
// pp_check worker mode (worker/pp_modes.cpp): p2p messages with their shapes, then
// 3-layer models split into 2 or 3 stages that must compute the one-process loss and
// gradients. Cases share a launch because process start-up and rendezvous dominate.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/worker_cases.h"

namespace aspen::parallel {
namespace {

void expect_cases_pass(int ranks, const std::vector<std::string>& cases) {
  expect_worker_cases_pass("pp_check", "pp", ranks, cases);
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
