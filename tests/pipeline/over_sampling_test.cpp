// Over-sampling with abort of stragglers through the pipeline (pipeline.over_sample,
// staleness_window.h): an async run admits extra groups, trains each update on the
// oldest scored groups within the window, aborts the groups that fell out of it once
// nobody holds them, trains every group at most once, keeps the staleness bound, and
// accounts for every group it drew: trained, still pending, or aborted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <thread>

#include "aspen/pipeline/iteration_engine.h"
#include "tiny_run.h"

namespace aspen::pipeline {
// Named: the tests are a unity build.
namespace over_sampling_test {

// Two groups per update and one extra (0.5): half the groups run to the 24-token cap,
// so some group admitted at a version always finishes after its window closed.
void expect_over_sampled_run(const std::string& mode, int64_t eta, int64_t iterations) {
  SCOPED_TRACE(mode);
  const TrainConfig config = testing::tiny_run_config(
      {"pipeline.mode=" + mode, "pipeline.max_staleness=1", "pipeline.instances=2",
       "rollout.prompts_per_iteration=2", "train.iterations=" + std::to_string(iterations),
       "rollout.max_tokens=24", "rollout.long_tail_fraction=0.5", "pipeline.over_sample=0.5"});
  RlSetup setup = build_rl_setup(config);
  RlWorkers workers(config, setup);
  EngineContext context{config, setup, workers};
  // Slow, jittery instances and a short update: the trainer outruns the long groups.
  setenv("ASPEN_FAULT_STEP_DELAY_MS", "20", 1);
  context.inject_delay = [](const std::string& role) {
    if (role == "trainer") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  IterationEngine engine(context, std::nullopt);
  std::set<int64_t> trained;
  int64_t aborted = 0, aborted_rows = 0;
  for (int64_t i = 0; i < config.train.iterations; ++i) {
    const nlohmann::json line = engine.iteration(i);
    for (const auto& [behind, rows] : line["bubbles"]["staleness_histogram"].items()) {
      EXPECT_LE(std::stoll(behind), eta) << "iteration " << i;
      EXPECT_GE(std::stoll(behind), 0);
    }
    EXPECT_EQ(line["trained_groups"].get<int64_t>(), 2) << "iteration " << i;
    EXPECT_EQ(line["trained_rows"].get<int64_t>(), line["trained_groups"].get<int64_t>() * 4);
    for (int64_t group : line["batch_groups"]) {
      EXPECT_TRUE(trained.insert(group).second) << "group " << group << " trained twice";
    }
    EXPECT_GE(line["aborted_groups"].get<int64_t>(), aborted);  // cumulative
    aborted = line["aborted_groups"].get<int64_t>();
    aborted_rows = line["aborted_rows"].get<int64_t>();
  }
  const nlohmann::json state = engine.state();
  engine.stop();
  unsetenv("ASPEN_FAULT_STEP_DELAY_MS");
  EXPECT_GT(aborted, 0);
  EXPECT_EQ(aborted_rows, aborted * 4);  // whole groups
  // Every group drawn is trained, still pending, or aborted, exactly one of them.
  std::set<int64_t> pending;
  for (const auto& entry : state["pending"]) pending.insert(entry.at(0).get<int64_t>());
  const int64_t drawn = state["prompts"]["next_group"].get<int64_t>();
  int64_t accounted = aborted;
  for (int64_t g = 0; g < drawn; ++g) {
    EXPECT_LE(trained.count(g) + pending.count(g), 1u) << "group " << g;
    accounted += static_cast<int64_t>(trained.count(g) + pending.count(g));
  }
  EXPECT_EQ(accounted, drawn);
}

TEST(OverSamplingRun, AsyncAbortsStragglersTrainsEveryOtherGroupOnceWithinTheBoundAndLosesNone) {
  expect_over_sampled_run("async", 1, 10);
}

TEST(OverSamplingRun, SyncTrainsTheFirstGroupsScoredAndAbortsTheRest) {
  // eta 0: update i takes the first two groups of version i; the third never trains.
  expect_over_sampled_run("sync", 0, 6);
}

}  // namespace over_sampling_test
}  // namespace aspen::pipeline
