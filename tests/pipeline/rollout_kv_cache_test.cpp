// aspen train's rollout KV cache: rollout.kv_cache_mb as given, or
// rollout.kv_cache_fraction of the memory free once the policy is loaded, split evenly
// over the process's rollout instances; a fraction outside (0, 0.95] is refused naming
// the key.
#include <gtest/gtest.h>

#include <string>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/rollout/kv_budget.h"
#include "aspen/util/error.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

TEST(RolloutKvCache, MegabytesAsGivenOrAShareOfFreeMemorySplitOverInstances) {
  RlSetup setup;  // only rollout_device is read: the CPU
  const TrainConfig fixed = testing::tiny_run_config({"rollout.kv_cache_mb=96"});
  EXPECT_EQ(rollout_kv_cache_bytes(fixed, setup, 2), int64_t{96} << 20);

  const TrainConfig share = testing::tiny_run_config({"rollout.kv_cache_fraction=0.2"});
  const double free_before = static_cast<double>(free_memory_bytes(torch::kCPU));
  const double one = static_cast<double>(rollout_kv_cache_bytes(share, setup, 1));
  const double each_of_four = static_cast<double>(rollout_kv_cache_bytes(share, setup, 4));
  // Free memory moves a little between the readings (other processes): 10%.
  EXPECT_NEAR(one, 0.2 * free_before, 0.1 * 0.2 * free_before);
  EXPECT_NEAR(each_of_four, one / 4.0, 0.1 * one / 4.0);
}

TEST(RolloutKvCache, AFractionOutsideItsRangeIsRefusedNamingTheKey) {
  for (const char* bad : {"rollout.kv_cache_fraction=1.5", "rollout.kv_cache_fraction=-0.1"}) {
    try {
      testing::tiny_run_config({bad});
      FAIL() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rollout.kv_cache_fraction"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace aspen::pipeline
