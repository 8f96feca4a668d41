// The PPO critic on pipeline stages (worker/pp_critic_modes.cpp): values through the
// forward-only pass, then one update of two clipped AdamW steps with the clipped value
// loss, over 2 stages and over 4 ranks as DP x PP, equal one process - value loss, grad
// norm and every stage's weights (the value head on the last stage) - for a dense Qwen3
// and a tied-embedding Qwen2 (whose critic keeps no embedding copy on the last stage).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/worker_cases.h"

namespace aspen::parallel {
namespace {

TEST(PipelineParallelCritic, TwoStagesUpdateLikeOneProcessForQwen3AndTiedQwen2) {
  expect_worker_cases_pass("pp_critic", "pp_critic", 2, {"qwen3_dense", "qwen2_tied"});
}

TEST(PipelineParallelCritic, TwoPipelinesOfTwoStagesTrainTheirSharesLikeOneProcess) {
  expect_worker_cases_pass("pp_critic", "pp_critic", 4, {"qwen3_dense@dp2", "qwen2_tied@dp2"});
}

}  // namespace
}  // namespace aspen::parallel
