// Tensor parallelism over real processes: every rank of `aspen launch` runs the
// tp_check worker mode (worker/tp_modes.cpp), which checks the paired collectives on
// known values and compares TP models against the single-process model on the same
// weights and batch: hidden states, log-probs, entropy and every parameter gradient.
// Cases share a launch because process start-up and rendezvous dominate the time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/worker_cases.h"

namespace aspen::parallel {
namespace {

void expect_cases_pass(int ranks, const std::vector<std::string>& cases) {
  expect_worker_cases_pass("tp_check", "tp", ranks, cases);
}

// Qwen2 with attention bias (H = 4, K = 2: one kv head per rank), Qwen2 with K = 1
// (the kv head replicated on both ranks), Qwen3 with q/k norms, head_dim 12 and tied
// embeddings (loaded from shards rather than full tensors), Qwen3 with attention_bias
// (an o_proj bias added once after the row-parallel reduction), Qwen3-MoE (experts split
// over their width, the router replicated).
TEST(TensorParallel, TwoRanksMatchOneProcessForQwen2BiasReplicatedKvAndQwen3Tied) {
  expect_cases_pass(2, {"collectives", "qwen2_bias", "kv_replicated", "qwen3_tied",
                        "qwen3_attention_bias", "qwen3_moe"});
}

// LoRA on all seven projections: adapters of split kv heads (K = 2), of a replicated one
// (K = 1) and loaded from shards (Qwen3, tied) compute and differentiate like one process;
// only the adapters get gradients.
TEST(TensorParallel, TwoRanksMatchOneProcessWithLoraAdaptersOnlyTheAdaptersTrain) {
  expect_cases_pass(2, {"lora_kv_split", "lora_kv_replicated", "lora_qwen3_tied"});
}

// K = 2 kv heads over 4 ranks: each replicated on 2 ranks, so replica gradients are
// summed within pairs, not over the whole group.
TEST(TensorParallel, FourRanksMatchOneProcessWithKvHeadsReplicatedInPairs) {
  expect_cases_pass(4, {"collectives", "qwen3_kv_replicated", "qwen3_moe"});
}

}  // namespace
}  // namespace aspen::parallel
