// The actor trainer on pipeline stages (worker/pp_actor_modes.cpp): old and reference
// log-probs through the forward-only pass, then one update of two clipped AdamW steps
// with a KL term, over 2 and 3 stages and over 4 ranks as PP x TP, DP x PP and PP x EP,
// equal one process - loss, grad norm and every stage's weights - for a dense Qwen3, a
// tied-embedding Qwen2 and a Qwen3-MoE.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/worker_cases.h"

namespace aspen::parallel {
namespace {

TEST(PipelineParallelActor, TwoStagesUpdateLikeOneProcessForQwen3AndTiedQwen2) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 2, {"qwen3_dense", "qwen2_tied"});
}

// Qwen3-MoE with a load-balancing loss: its value needs every stage's routing and each
// stage's routers their gradient from the whole forward's expert counts
// (train/pipeline_routing.h). Over 3 stages the middle one (the dense layer 1) relays.
TEST(PipelineParallelActor, MoeLoadBalancingLossCrossesStagesLikeOneProcess) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 3, {"qwen3_moe"});
}

// A middle stage: it only relays activations and gradients, and stays out of the tied
// embedding's gradient sum and its clip-norm share.
TEST(PipelineParallelActor, ThreeStagesUpdateLikeOneProcessForQwen3AndTiedQwen2) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 3, {"qwen3_dense", "qwen2_tied"});
}

// PP x TP: 2 stages of 2 tensor-parallel ranks. The pipeline group links the same TP
// rank of both stages; each TP rank holds its shard of its stage (and of the tied
// embedding on both ends), the clip norm sums over TP, then PP.
TEST(PipelineParallelActor, TwoStagesOfTwoTensorParallelRanksUpdateLikeOneProcess) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 4, {"qwen3_dense@tp2", "qwen2_tied@tp2"});
}

// DP x PP: 2 pipelines of 2 stages, each training its balanced share of the rows; each
// stage's gradients are summed over its DP group (after the tied-embedding sum), the clip
// norm over the pipeline only.
TEST(PipelineParallelActor, TwoPipelinesOfTwoStagesTrainTheirSharesLikeOneProcess) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 4, {"qwen3_dense@dp2", "qwen2_tied@dp2"});
}

// PP x EP: 2 pipelines of 2 stages, each stage's 4 experts split over its 2 EP ranks
// (data-parallel ranks with their own experts). The ranks get 6 and 2 rows, so the one
// with fewer micro-batches runs padding passes through its stages.
TEST(PipelineParallelActor, TwoStagesOfTwoExpertParallelRanksUpdateLikeOneProcess) {
  expect_worker_cases_pass("pp_actor", "pp_actor", 4, {"qwen3_moe@ep2"});
}

}  // namespace
}  // namespace aspen::parallel
