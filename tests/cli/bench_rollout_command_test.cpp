// `aspen bench rollout`: without --kv-cache-mb every workload gets a KV cache that holds
// it whole, so the grid measures compute, not preemption (a fixed 256 MiB thrashed
// real model sizes); with a small budget the preemptions are reported, not hidden.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

using testing::run_command;

nlohmann::json bench(const std::string& extra) {
  const auto result = run_command(testing::aspen_cli() +
                                  " bench rollout --threads 1 --prompt-lens 48 --gen-lens 24"
                                  " --parallel 8 --no-sampler --json" + extra);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

TEST(BenchRollout, TheKvCacheHoldsEachWorkloadUnlessABudgetIsGiven) {
  // Only the 2 MiB run needs the long tail (its longest request must fit there).
  const nlohmann::json sized = bench(" --long-tail-requests 0");
  EXPECT_EQ(sized["model"]["kv_cache"], "sized to each workload");
  EXPECT_EQ(sized["model"]["threads"], 1);
  EXPECT_EQ(sized["grid"][0]["preemptions"], 0);
  // 2 MiB holds 16 blocks of the bench model: its longest long-tail request (192 tokens)
  // fits, the grid's 8 x 72 tokens do not.
  const nlohmann::json small = bench(" --kv-cache-mb 2");
  EXPECT_EQ(small["model"]["kv_cache"], "2 MiB");
  EXPECT_GT(small["grid"][0]["preemptions"].get<int64_t>(), 0);
  // A share of the free memory: whatever it is here, some MiB, and the grid fits.
  const nlohmann::json share = bench(" --kv-cache-fraction 0.05 --long-tail-requests 0");
  EXPECT_NE(share["model"]["kv_cache"].get<std::string>().find(" MiB"), std::string::npos);
  EXPECT_EQ(share["grid"][0]["preemptions"], 0);
}

TEST(GenerateThreads, ANegativeThreadCountIsAnError) {
  const auto result =
      run_command(testing::aspen_cli() + " generate --model /nonexistent --prompt x --threads -1");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--threads"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
