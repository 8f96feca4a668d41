// The iteration engine (ASP) in one process: async at eta = 0 trains like sync mode, the
// staleness bound holds under injected random delays, no group is lost or trained
// twice, and the trace is a valid Chrome trace with a track per role and instance.
#include "aspen/pipeline/iteration_engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "aspen/io/model_dir.h"
#include "aspen/pipeline/rl_run.h"
#include "swap_check.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

TrainConfig tiny_config(const std::vector<std::string>& overrides) {
  return testing::tiny_run_config(overrides);
}

TEST(IterationEngine, ZeroStalenessAsyncTrainsLikeSyncModeStreamedBatchedAndChunked) {
  const std::string sync_dir = ::testing::TempDir() + "/aspen_async_eq_sync";
  const std::string async_dir = ::testing::TempDir() + "/aspen_async_eq_async";
  fs::remove_all(sync_dir);
  fs::remove_all(async_dir);
  {
    const TrainConfig config = tiny_config({});
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{sync_dir});
  }
  // Streamed (groups trained as they arrive, one step at the end) and batched updates;
  // and groups split into single-sample chunks dispatched on their own.
  for (const std::string variant : {"pipeline.stream_updates=true", "pipeline.stream_updates=false",
                                    "pipeline.dispatch_chunk=1"}) {
    SCOPED_TRACE(variant);
    fs::remove_all(async_dir);
    {
      const TrainConfig config = tiny_config(
          {"pipeline.mode=async", "pipeline.max_staleness=0", "pipeline.instances=2", variant});
      RlSetup setup = build_rl_setup(config);
      run_rl(config, setup, RunOptions{async_dir});
    }
    const auto sync = read_rl_metrics(sync_dir);
    const auto async = read_rl_metrics(async_dir);
    ASSERT_EQ(sync.size(), 4u);
    ASSERT_EQ(async.size(), 4u);
    for (size_t i = 0; i < sync.size(); ++i) {
      // The same samples (same prompts, same per-group seeds, same weights)...
      for (const char* key : {"rows", "trained_rows", "trained_tokens", "policy_version"}) {
        EXPECT_EQ(async[i][key], sync[i][key]) << key << " at " << i;
      }
      for (const char* key : {"reward_mean", "accuracy", "response_length_mean"}) {
        EXPECT_DOUBLE_EQ(async[i][key].get<double>(), sync[i][key].get<double>()) << key;
      }
      // ...and the same update, up to the summation order of a differently ordered batch.
      for (const char* key : {"policy_loss", "grad_norm", "entropy"}) {
        EXPECT_NEAR(async[i][key].get<double>(), sync[i][key].get<double>(), 1e-4) << key;
      }
      EXPECT_EQ(async[i]["bubbles"]["staleness_histogram"], nlohmann::json({{"0", 16}}));
      // Each group's lengths (what aspen simulate replays): every row, the same samples.
      auto flat = [](const nlohmann::json& groups) {
        std::vector<int64_t> lengths;
        for (const auto& group : groups) {
          for (const auto& length : group) lengths.push_back(length.get<int64_t>());
        }
        std::sort(lengths.begin(), lengths.end());
        return lengths;
      };
      const std::vector<int64_t> lengths = flat(async[i]["response_lengths"]);
      EXPECT_EQ(static_cast<int64_t>(lengths.size()), async[i]["rows"].get<int64_t>());
      EXPECT_EQ(lengths, flat(sync[i]["response_lengths"]));
      double sum = 0;
      for (int64_t length : lengths) sum += static_cast<double>(length);
      EXPECT_DOUBLE_EQ(sum / static_cast<double>(lengths.size()),
                       async[i]["response_length_mean"].get<double>());
    }
    const auto a = load_model_weights(sync_dir + "/final");
    const auto b = load_model_weights(async_dir + "/final");
    for (const auto& [name, tensor] : a) {
      EXPECT_TRUE(torch::allclose(tensor, b.at(name), 1e-4, 1e-5)) << name;
    }
  }
}

TEST(IterationEngine, SwappingTheOptimizerStateOutWhileWaitingAtZeroStalenessChangesNothing) {
  // At eta 0 the trainer waits for every batch: the state leaves memory meanwhile and
  // comes back bit for bit before the update.
  testing::expect_swap_changes_nothing({"pipeline.mode=async", "pipeline.max_staleness=0"},
                                       "engine");
}

TEST(IterationEngine, StalenessBoundHoldsAndNoGroupIsLostOrTrainedTwiceUnderRandomDelays) {
  // eta 1 and 2 with in-flight requests continuing; eta 1 with them interrupted and
  // resumed on each new weight version; all streamed, and eta 2 once more batched.
  struct Case {
    int64_t eta;
    bool interrupt;
    bool stream;
  };
  for (const Case& c :
       std::vector<Case>{{1, false, true}, {2, false, true}, {1, true, true}, {2, false, false}}) {
    const int64_t eta = c.eta;
    SCOPED_TRACE("eta " + std::to_string(eta) + (c.interrupt ? " interrupt" : "") +
                 (c.stream ? " streamed" : " batched"));
    const TrainConfig config =
        tiny_config({"pipeline.mode=async", "pipeline.max_staleness=" + std::to_string(eta),
                     "pipeline.instances=2", "pipeline.dispatch=round_robin", "train.iterations=12",
                     "rollout.max_tokens=12",
                     std::string("pipeline.interrupt=") + (c.interrupt ? "true" : "false"),
                     std::string("pipeline.stream_updates=") + (c.stream ? "true" : "false")});
    RlSetup setup = build_rl_setup(config);
    RlWorkers workers(config, setup);
    std::mutex rng_mutex;
    std::mt19937 rng(static_cast<unsigned>(eta));
    EngineContext context{config, setup, workers};
    // Jittery instances (0-5 ms after each engine step) and a jittery trainer.
    setenv("ASPEN_FAULT_STEP_DELAY_MS", "5", 1);
    context.inject_delay = [&](const std::string&) {
      int ms = 0;
      {
        std::lock_guard<std::mutex> lock(rng_mutex);
        ms = std::uniform_int_distribution<int>(0, 30)(rng);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
    auto schedule = std::make_unique<IterationEngine>(context, std::nullopt);
    std::set<int64_t> trained;
    for (int64_t i = 0; i < config.train.iterations; ++i) {
      const nlohmann::json line = schedule->iteration(i);
      EXPECT_EQ(line["policy_version"], i + 1);
      for (const auto& [behind, rows] : line["bubbles"]["staleness_histogram"].items()) {
        EXPECT_LE(std::stoll(behind), eta) << "iteration " << i;
        EXPECT_GE(std::stoll(behind), 0);
      }
      EXPECT_GE(line["trained_groups"].get<int64_t>(), 4);
      for (int64_t group : line["batch_groups"]) {
        EXPECT_TRUE(trained.insert(group).second) << "group " << group << " trained twice";
      }
    }
    const nlohmann::json state = schedule->state();
    schedule->stop();
    unsetenv("ASPEN_FAULT_STEP_DELAY_MS");
    // Every group drawn is either trained or still pending: nothing lost.
    std::set<int64_t> pending;
    for (const auto& entry : state["pending"]) pending.insert(entry.at(0).get<int64_t>());
    const int64_t drawn = state["prompts"]["next_group"].get<int64_t>();
    for (int64_t g = 0; g < drawn; ++g) {
      EXPECT_TRUE(trained.count(g) + pending.count(g) == 1) << "group " << g;
    }
    EXPECT_LE(static_cast<int64_t>(pending.size()), (eta + 1) * 4);
  }
}

// One sample's trip through the dock (docs/design.md): admission's put; the rollout's
// claim, get, renew, put (with the rows' infos) and ack; the reward's claim, get, put
// and ack; the batch's claim, get and ack: 13 calls per row, whatever the algorithm,
// since the trainer's stages write nothing back (before the engine's split: 26 for
// grpo, 30 with a reference, 33 for ppo). Rows admitted for the next batch when the
// run ends made part of their trip too: at most one batch of them.
TEST(IterationEngine, OneSampleTripMakesThirteenDockCallsPerRowForEveryAlgorithm) {
  for (const std::string algorithm : {"grpo", "ppo"}) {
    SCOPED_TRACE(algorithm);
    const TrainConfig config = tiny_config({"pipeline.mode=sync", "algorithm.name=" + algorithm,
                                            "algorithm.kl_coef=0.01", "train.iterations=3"});
    RlSetup setup = build_rl_setup(config);
    RlWorkers workers(config, setup);
    EngineContext context{config, setup, workers};
    IterationEngine engine(context, std::nullopt);
    int64_t calls = 0, rows = 0;
    for (int64_t i = 0; i < config.train.iterations; ++i) {
      const nlohmann::json line = engine.iteration(i);
      calls += line.at("dock_row_calls").get<int64_t>();
      rows += line.at("rows").get<int64_t>();
    }
    engine.stop();
    const int64_t in_flight = config.rollout.prompts_per_iteration * config.rollout.n;
    EXPECT_GE(calls, 13 * rows);
    EXPECT_LE(calls, 13 * (rows + in_flight));
  }
}

TEST(IterationEngine, TraceIsAChromeTraceWithATrackPerRoleAndInstance) {
  const std::string dir = ::testing::TempDir() + "/aspen_async_trace";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string trace_path = dir + "/trace.json";
  const TrainConfig config = tiny_config({"pipeline.mode=async", "pipeline.instances=2",
                                          "train.iterations=3", "logging.trace=" + trace_path});
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{dir + "/run"});
  std::ifstream in(trace_path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int64_t, std::string> tracks;
  std::map<std::string, int> spans;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      tracks[event["tid"]] = event["args"]["name"];
    }
  }
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X")
      ++spans[tracks.at(event["tid"]) + "/" + event["name"].get<std::string>()];
  }
  EXPECT_GT(spans["rollout instance 0 (rank 0)/generate step"], 0);
  EXPECT_GT(spans["rollout instance 1 (rank 0)/generate step"], 0);
  EXPECT_GT(spans["reward (rank 0)/reward"], 0);
  EXPECT_EQ(spans["trainer (rank 0)/update"], 3);      // one optimizer step per iteration
  EXPECT_GE(spans["trainer (rank 0)/accumulate"], 3);  // streamed: at least one part per step
  EXPECT_GE(spans["trainer (rank 0)/publish"], 3);
}

}  // namespace
}  // namespace aspen::pipeline
