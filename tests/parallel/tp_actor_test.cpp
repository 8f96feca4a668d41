// The actor trainer on a tensor-parallel model (worker/tp_actor_modes.cpp): one update
// of two clipped optimizer steps at TP = 2 and 4 equals TP = 1, shard for shard.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_command.h"
#include "parallel/binaries.h"

namespace aspen::parallel {
namespace {


void expect_actor_cases_pass(int ranks, const std::vector<std::string>& cases) {
  std::string args;
  for (const auto& name : cases) args += " " + name;
  const auto result =
      testing::run_command(kAspen + " launch --nproc-per-node " + std::to_string(ranks) +
                           " --master-port 0 -- " + kWorker + " tp_actor" + args);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const auto& name : cases) {
    for (int r = 0; r < ranks; ++r) {
      EXPECT_NE(result.output.find("rank " + std::to_string(r) + " tp_actor " + name + " ok"),
                std::string::npos)
          << "case " << name << " rank " << r << "\n"
          << result.output;
    }
  }
}

TEST(TensorParallelActor, TwoRanksUpdateLikeOneProcessWithClippingAndKl) {
  expect_actor_cases_pass(2, {"gqa", "kv_replicated", "tied"});
}

// LoRA on all seven projections: the adapters update like one process, kv heads split
// (K = 2) and replicated (K = 1), and the base stays frozen.
TEST(TensorParallelActor, TwoRanksUpdateLoraAdaptersLikeOneProcess) {
  expect_actor_cases_pass(2, {"lora_gqa", "lora_kv_replicated"});
}

// At 4 ranks the single kv head sits on all four: its clip-norm share must count once.
TEST(TensorParallelActor, FourRanksCountReplicatedKvHeadsOnceInTheClipNorm) {
  expect_actor_cases_pass(4, {"kv_replicated"});
}

}  // namespace
}  // namespace aspen::parallel
