// Partial rollouts through the pipeline: the partial_* columns keep a cut row's output,
// the per-token versions column gives the trajectories' version mix, and an async run
// with partial rollouts cuts units at weight switches, resumes them, loses no row,
// trains every group once and keeps the staleness bound from each row's oldest token.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <thread>

#include "aspen/pipeline/iteration_engine.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/token_versions.h"
#include "tiny_run.h"

namespace aspen::pipeline {
// Named: the tests are a unity build.
namespace partial_rollout_test {

TEST(PartialRolloutRows, SavedOutputGivesBackWhatWasCutAndWhatHadFinished) {
  Completion cut;
  cut.token_ids = {5, 6, 7};
  cut.logprobs = {-0.5f, -1.0f, -1.5f};
  cut.policy_versions = {3, 3, 4};
  cut.routed_experts = {1, 2, 3, 4, 5, 6};
  Completion finished;
  finished.token_ids = {9};
  finished.logprobs = {-0.25f};
  finished.policy_versions = {4};
  finished.routed_experts = {7, 8};
  finished.finish_reason = FinishReason::kStop;
  const std::vector<ColumnData> columns = partial_columns({cut, finished}, /*with_routing=*/true);
  const Completion a = saved_output(columns, 0, true);
  EXPECT_EQ(a.token_ids, cut.token_ids);
  EXPECT_EQ(a.logprobs, cut.logprobs);
  EXPECT_EQ(a.policy_versions, cut.policy_versions);
  EXPECT_EQ(a.routed_experts, cut.routed_experts);
  EXPECT_EQ(a.finish_reason, FinishReason::kNone);
  const Completion b = saved_output(columns, 1, true);
  EXPECT_EQ(b.token_ids, finished.token_ids);
  EXPECT_EQ(b.finish_reason, FinishReason::kStop);
  // Admission's rows: nothing generated yet.
  const Completion fresh = saved_output(empty_partial_columns(2, false), 1, false);
  EXPECT_TRUE(fresh.token_ids.empty());
  EXPECT_EQ(fresh.finish_reason, FinishReason::kNone);
  // The schema has them only when asked for, and says so.
  EXPECT_TRUE(rl_schema_options(make_rl_schema({false, true})).with_partial);
  EXPECT_FALSE(rl_schema_options(make_rl_schema({true, false})).with_partial);
  EXPECT_TRUE(rl_schema_options(make_rl_schema({true, false})).with_routing);
}

TEST(PartialRolloutRows, TokenVersionStatsCountVersionsPerRowAndSwitchedTokens) {
  ColumnData versions{rl_columns::kRolloutVersions, {}};
  versions.values.push_back(torch::tensor({2, 2, 3, 3, 4}, torch::kInt64));  // 3 versions
  versions.values.push_back(torch::tensor({5, 5}, torch::kInt64));           // 1 version
  versions.values.push_back(torch::zeros({0}, torch::kInt64));               // empty
  const TokenVersionStats stats = token_version_stats(versions);
  EXPECT_EQ(stats.rows, 3);
  EXPECT_EQ(stats.tokens, 7);
  EXPECT_EQ(stats.versions_max, 3);
  EXPECT_EQ(stats.switched_tokens, 3);
  const nlohmann::json metrics = stats.metrics();
  EXPECT_DOUBLE_EQ(metrics["rollout_versions_per_row_mean"].get<double>(), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics["rollout_switched_token_fraction"].get<double>(), 3.0 / 7.0);
}

TEST(PartialRolloutRun, CutsAtWeightSwitchesResumesAndTrainsEveryGroupOnceWithinTheBound) {
  const int64_t eta = 2;
  // One whole group per update, dispatched round robin to two instances: at a weight
  // switch one instance is generating the group of the version before while the other
  // has finished its own and waits, idle (the skewness that partial rollouts move).
  const TrainConfig config = testing::tiny_run_config(
      {"pipeline.mode=async", "pipeline.max_staleness=2", "pipeline.instances=2",
       "pipeline.dispatch=round_robin", "pipeline.dispatch_chunk=0",
       "rollout.prompts_per_iteration=1", "train.iterations=48", "rollout.max_tokens=24",
       "rollout.long_tail_fraction=0.5", "pipeline.partial_rollout=true",
       "pipeline.partial_rollout_min_tokens=2"});
  RlSetup setup = build_rl_setup(config);
  RlWorkers workers(config, setup);
  EngineContext context{config, setup, workers};
  // Slow instances (0-25 ms after each step: a 24-token wave takes ~0.3 s) and an update
  // of ~80 ms: each new version reaches the instances while the groups admitted at the
  // one before are generating, as on a cluster where rollout dominates.
  setenv("ASPEN_FAULT_STEP_DELAY_MS", "25", 1);
  context.inject_delay = [](const std::string& role) {
    if (role == "trainer") std::this_thread::sleep_for(std::chrono::milliseconds(80));
  };
  IterationEngine engine(context, std::nullopt);
  std::set<int64_t> trained;
  int64_t cut = 0, resumed = 0, mixed_rows_max = 0;
  double switched = 0.0;
  // A cut needs a weight switch to meet an idle peer, which the machine's load decides:
  // at least 12 iterations, then until a cut unit was resumed (48 at most; 12 suffice
  // on an idle machine, CI's load once needed more).
  for (int64_t i = 0; i < config.train.iterations; ++i) {
    if (i >= 12 && resumed > 0) break;
    const nlohmann::json line = engine.iteration(i);
    // Staleness from each row's oldest token, within eta.
    for (const auto& [behind, rows] : line["bubbles"]["staleness_histogram"].items()) {
      EXPECT_LE(std::stoll(behind), eta) << "iteration " << i;
      EXPECT_GE(std::stoll(behind), 0);
    }
    // Whole groups, every row of each (a cut row is not lost), each group once.
    EXPECT_EQ(line["trained_rows"].get<int64_t>(), line["trained_groups"].get<int64_t>() * 4);
    for (int64_t group : line["batch_groups"]) {
      EXPECT_TRUE(trained.insert(group).second) << "group " << group << " trained twice";
    }
    cut = line["partial_cut_samples"].get<int64_t>();
    resumed = line["partial_resumed_samples"].get<int64_t>();
    mixed_rows_max = std::max(mixed_rows_max, line["rollout_versions_per_row_max"].get<int64_t>());
    switched = std::max(switched, line["rollout_switched_token_fraction"].get<double>());
  }
  const nlohmann::json state = engine.state();
  engine.stop();
  unsetenv("ASPEN_FAULT_STEP_DELAY_MS");
  EXPECT_GT(cut, 0);
  EXPECT_GT(resumed, 0);
  EXPECT_LE(resumed, cut);
  // Resumed rows carry the versions of the weights that cut them and of those that
  // resumed them.
  EXPECT_GE(mixed_rows_max, 2);
  EXPECT_GT(switched, 0.0);
  // Every group drawn is either trained or still pending: nothing lost.
  std::set<int64_t> pending;
  for (const auto& entry : state["pending"]) pending.insert(entry.at(0).get<int64_t>());
  const int64_t drawn = state["prompts"]["next_group"].get<int64_t>();
  for (int64_t g = 0; g < drawn; ++g) {
    EXPECT_EQ(trained.count(g) + pending.count(g), 1u) << "group " << g;
  }
}

}  // namespace partial_rollout_test
}  // namespace aspen::pipeline
