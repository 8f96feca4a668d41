// Trajectories under the iteration engine's rules (issue #35: "staleness bounds, DAPO's
// rule and streaming work with trajectories"): multi-turn trajectories of the synthetic
// environment (every trajectory has its three turns, two timed tool calls between them)
// under DAPO's dynamic sampling train only informative groups and refill the batch;
// streamed async updates train them as they arrive; and the staleness bound counts each
// trajectory from its oldest model token, including trajectories whose turns ran on
// several weight versions. In each, every group drawn is trained, dropped or pending.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "aspen/pipeline/iteration_engine.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/staleness_window.h"
#include "dynamic_sampling_checks.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

TrainConfig trajectory_schedule_config(const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {"rollout.environment.kind=synthetic",
                                        "rollout.environment.chat_template=qwen3",
                                        "rollout.environment.synthetic_turns=3",
                                        "rollout.environment.max_turns=3",
                                        "rollout.environment.tool_latency_ms=10",
                                        "rollout.environment.tool_latency_sigma=0.5",
                                        "rollout.environment.observation_tokens=8",
                                        "rollout.environment.max_trajectory_tokens=232",
                                        "rollout.max_tokens=8",
                                        "model.tokenizer_vocab=300",
                                        "train.sft_steps=0"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return testing::tiny_run_config(overrides);
}

// Every trajectory of a prompt whose text hashes even scores the same (a group with
// zero advantage everywhere); the others score by the parity of the final answer's length.
class HalfInformativeAnswers : public Verifier {
 public:
  std::string name() const override { return "half_informative"; }
  double score(const RewardInput& input) const override {
    if (uninformative(input.prompt)) return 0.5;
    return input.response.size() % 2 == 0 ? 1.0 : 0.0;
  }
  static bool uninformative(const std::string& prompt) {
    return std::hash<std::string>{}(prompt) % 2 == 0;
  }
};

// Every group drawn is trained, dropped by DAPO's rule (counted), or still pending:
// none is lost, none trained twice.
void expect_every_group_accounted(const nlohmann::json& state, const std::set<int64_t>& trained,
                          int64_t dropped) {
  std::set<int64_t> pending;
  for (const auto& entry : state["pending"]) pending.insert(entry.at(0).get<int64_t>());
  const int64_t drawn = state["prompts"]["next_group"].get<int64_t>();
  EXPECT_GT(drawn, 0);
  int64_t accounted = 0;
  for (int64_t g = 0; g < drawn; ++g) {
    EXPECT_LE(trained.count(g) + pending.count(g), 1U) << "group " << g;
    if (trained.count(g) + pending.count(g) == 1) ++accounted;
  }
  EXPECT_EQ(accounted + dropped, drawn) << "a group was lost";
}

void expect_trajectories(const nlohmann::json& line) {
  // Room for every turn (synthetic_environment_run_test.cpp): three turns, two calls.
  EXPECT_DOUBLE_EQ(line.at("turns_mean").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(line.at("tool_calls_mean").get<double>(), 2.0);
}

TEST(TrajectorySchedules, DynamicSamplingTrainsOnlyInformativeTrajectoryGroups) {
  for (const std::string mode : {"sync", "async"}) {
    SCOPED_TRACE(mode);
    const TrainConfig config =
        trajectory_schedule_config({"algorithm.name=dapo", "train.iterations=3", "pipeline.mode=" + mode,
                          "pipeline.max_staleness=1"});
    ASSERT_TRUE(config.algorithm.dynamic_sampling);
    RlSetup setup = build_rl_setup(config);
    // The synthetic environment scores the final answer with the run's verifier.
    setup.verifier = std::make_unique<HalfInformativeAnswers>();
    RlWorkers workers(config, setup);
    EngineContext context{config, setup, workers};
    const std::map<int64_t, int64_t> example_of = testing::drawn_examples(setup, config);
    auto engine = std::make_unique<IterationEngine>(context, std::nullopt);
    testing::DynamicSamplingTally tally;
    for (int64_t i = 0; i < config.train.iterations; ++i) {
      const nlohmann::json line = engine->iteration(i);
      expect_trajectories(line);
      testing::expect_dynamic_sampling_iteration(line, config, setup, example_of,
                                                 HalfInformativeAnswers::uninformative, tally);
    }
    const nlohmann::json state = engine->state();
    engine->stop();
    expect_every_group_accounted(state, tally.trained, tally.dropped);
    EXPECT_GT(tally.dropped, 0) << "half the prompts are uninformative: some must have been drawn";
  }
}

// Streamed async updates at eta 1 and 2: each update accumulates trajectory groups as
// they arrive; no row trains more than eta versions after its oldest model token, and a
// trajectory whose turns ran on k versions counts from the first: versions v..v+k-1
// exist from update v+k-1 on, so counted from v its staleness is >= k-1 (counted from
// its last turn it could be 0). Groups add up.
TEST(TrajectorySchedules, StreamedUpdatesHonourTheStalenessBoundFromTheOldestTurn) {
  int64_t spanning_iterations = 0;
  for (const int64_t eta : {1, 2}) {
    SCOPED_TRACE("eta " + std::to_string(eta));
    const TrainConfig config = trajectory_schedule_config(
        {"pipeline.mode=async", "pipeline.max_staleness=" + std::to_string(eta),
         "pipeline.stream_updates=true", "pipeline.instances=2", "train.iterations=6",
         "rollout.environment.tool_latency_ms=30"});
    ASSERT_TRUE(streams_updates(config));
    RlSetup setup = build_rl_setup(config);
    RlWorkers workers(config, setup);
    EngineContext context{config, setup, workers};
    auto engine = std::make_unique<IterationEngine>(context, std::nullopt);
    std::set<int64_t> trained;
    for (int64_t i = 0; i < config.train.iterations; ++i) {
      const nlohmann::json line = engine->iteration(i);
      expect_trajectories(line);
      EXPECT_TRUE(line["stage_seconds"].contains("accumulate")) << "the update was not streamed";
      EXPECT_EQ(line["trained_groups"].get<int64_t>(), 4);
      int64_t oldest_behind = -1;
      int64_t rows = 0;
      for (const auto& [behind, count] : line["bubbles"]["staleness_histogram"].items()) {
        EXPECT_LE(std::stoll(behind), eta) << "iteration " << i;
        EXPECT_GE(std::stoll(behind), 0);
        oldest_behind = std::max(oldest_behind, static_cast<int64_t>(std::stoll(behind)));
        rows += count.get<int64_t>();
      }
      EXPECT_EQ(rows, line["trained_rows"].get<int64_t>());
      const int64_t spanned = line["rollout_versions_per_row_max"].get<int64_t>();
      EXPECT_LE(spanned, eta + 1) << "a trajectory ran on more versions than the bound allows";
      EXPECT_GE(oldest_behind, spanned - 1)
          << "a trajectory over " << spanned << " versions must count from its first turn";
      if (spanned > 1) ++spanning_iterations;
      for (int64_t group : line["batch_groups"]) {
        EXPECT_TRUE(trained.insert(group).second) << "group " << group << " trained twice";
      }
    }
    const nlohmann::json state = engine->state();
    engine->stop();
    expect_every_group_accounted(state, trained, 0);
  }
  // 30 ms tool calls between turns: some trajectory's later turns run on newer weights.
  EXPECT_GT(spanning_iterations, 0) << "no trajectory spanned a weight version";
}

}  // namespace
}  // namespace aspen::pipeline
