// `aspen bench pp` smoke test: a tiny model over 1 and 2 stages (p2p dominates at this
// size, so the figures mean nothing; the shape of the JSON and its arithmetic do).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

TEST(BenchPpCommand, TinyRunReportsEveryStageAndMicroBatchCount) {
  const auto result = testing::run_command(
      testing::aspen_cli() +
      " bench pp --stages 1,2 --micro-batches 1,4 --layers 2 --hidden 64 --tokens 32"
      " --repeats 1 --warmup 0 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  ASSERT_EQ(json["runs"].size(), 4u) << result.out;
  EXPECT_EQ(json["model"]["layers"], 2);
  EXPECT_EQ(json["threads_per_stage"], 1);
  size_t i = 0;
  for (int p : {1, 2}) {
    for (int m : {1, 4}) {
      const auto& run = json["runs"][i++];
      SCOPED_TRACE(run.dump());
      EXPECT_EQ(run["stages"], p);
      EXPECT_EQ(run["micro_batches"], m);
      // The balanced micro-batcher's m packed micro-batches of about 32 tokens.
      ASSERT_EQ(run["micro_batch_tokens"].size(), static_cast<size_t>(m));
      int64_t tokens = 0;
      for (const auto& t : run["micro_batch_tokens"]) tokens += t.get<int64_t>();
      EXPECT_EQ(run["tokens_per_step"].get<int64_t>(), tokens);
      EXPECT_GT(run["tokens_per_s"].get<double>(), 0.0);
      EXPECT_DOUBLE_EQ(run["bubble_theory"].get<double>(), (p - 1.0) / (m + p - 1.0));
      ASSERT_EQ(run["stage_busy_fraction"].size(), static_cast<size_t>(p));
      double mean_busy = 0;
      for (const auto& f : run["stage_busy_fraction"]) {
        EXPECT_GT(f.get<double>(), 0.0);
        EXPECT_LE(f.get<double>(), 1.05);  // scheduler seconds within the wall (granularity)
        mean_busy += f.get<double>() / p;
      }
      EXPECT_NEAR(run["bubble_measured"].get<double>(), 1.0 - mean_busy, 1e-9);
      // Running is part of busy (busy adds the time runnable but preempted).
      ASSERT_EQ(run["stage_cpu_fraction"].size(), static_cast<size_t>(p));
      for (int s = 0; s < p; ++s) {
        EXPECT_LE(run["stage_cpu_fraction"][s].get<double>(),
                  run["stage_busy_fraction"][s].get<double>() + 1e-12);
      }
      EXPECT_GE(run["bubble_cpu"].get<double>(), run["bubble_measured"].get<double>() - 1e-12);
      EXPECT_EQ(run.contains("bubble_relative_error"), p > 1);
    }
  }
}

TEST(BenchPpCommand, MoreStagesThanLayersIsAnError) {
  const auto result =
      testing::run_command(testing::aspen_cli() + " bench pp --stages 4 --layers 2 --json");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--stages"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
