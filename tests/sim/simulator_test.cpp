// The simulator end to end on small clusters: the schedule's invariants (every batch
// trained, staleness within eta, the dock retiring exactly the trained rows), determinism,
// and what asynchrony buys when rollout and training take comparable time.
#include <gtest/gtest.h>

#include <fstream>

#include "aspen/config/train_config.h"
#include "aspen/sim/simulation_spec.h"
#include "aspen/util/config.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

// 4 trainers (DP 2 x TP 2) and 4 rollout H100s for Qwen2.5-7B; `overrides` on top.
TrainConfig small_cluster(const std::vector<std::string>& overrides = {}) {
  Config config = Config::parse(
      "simulate: {model: qwen2.5-7b, device: h100, length_median: 600, length_sigma: 0.8, "
      "prompt_tokens: 200, baseline: same}\n"
      "placement: {mode: disaggregated, train: {dp: 2, tp: 2}, rollout: {instances: 4, tp: 1}}\n"
      "rollout: {prompts_per_iteration: 16, n: 4, max_tokens: 4096, long_tail_fraction: 0.05}\n"
      "train: {iterations: 6}\n",
      "test config");
  for (const std::string& assignment : overrides) config.apply_override(assignment);
  return parse_train_config(config);
}

int64_t staleness_rows(const nlohmann::json& result, const std::string& behind) {
  return result["bubbles"]["staleness_histogram"].value(behind, int64_t{0});
}

TEST(Simulator, SyncTrainsEveryBatchOnTheNewestWeights) {
  const nlohmann::json sync = run_simulation(simulation_spec(small_cluster(), false));
  EXPECT_EQ(sync["trained_rows"], 6 * 16 * 4);
  EXPECT_EQ(staleness_rows(sync, "0"), 6 * 16 * 4);
  EXPECT_EQ(sync["dock"]["rows_retired"], 6 * 16 * 4);  // every consumer acked every row
}

TEST(Simulator, AsyncStalenessStaysWithinEta) {
  const nlohmann::json async = run_simulation(
      simulation_spec(small_cluster({"pipeline.max_staleness=2"}), true));
  EXPECT_EQ(async["trained_rows"], 6 * 16 * 4);
  int64_t rows = 0;
  for (const auto& [behind, count] : async["bubbles"]["staleness_histogram"].items()) {
    EXPECT_LE(std::stoi(behind), 2);
    rows += count.get<int64_t>();
  }
  EXPECT_EQ(rows, 6 * 16 * 4);
  EXPECT_GT(staleness_rows(async, "1") + staleness_rows(async, "2"), 0);
  EXPECT_EQ(async["dock"]["rows_retired"], 6 * 16 * 4);
}

TEST(Simulator, AsynchronyOverlapsRolloutWithTraining) {
  const nlohmann::json both = simulate_sync_and_async(small_cluster(), "");
  EXPECT_GT(both["ratio"].get<double>(), 1.05);
  EXPECT_GT(both["sync"]["bubbles"]["trainer_idle"].get<double>(),
            both["async"]["bubbles"]["trainer_idle"].get<double>());
}

TEST(Simulator, IsDeterministic) {
  const SimulationSpec spec = simulation_spec(small_cluster(), true);
  EXPECT_EQ(run_simulation(spec).dump(), run_simulation(spec).dump());
}

TEST(Simulator, ColocatedBaselineUsesEveryDeviceForBoth) {
  TrainConfig config = small_cluster();
  config.simulate.baseline = SimulateBaseline::kColocated;
  const SimulationSpec sync = simulation_spec(config, false);
  EXPECT_TRUE(sync.cluster.colocated);
  EXPECT_EQ(sync.cluster.train_dp, 4);   // 8 devices / train.tp 2
  EXPECT_EQ(sync.cluster.instances, 8);  // 8 devices / rollout.tp 1
  EXPECT_EQ(sync.cluster.devices(), 8);
}

TEST(Simulator, DevicesGiveTheRolloutWhatTheTrainersLeave) {
  const TrainConfig config = small_cluster({"simulate.devices=16"});
  EXPECT_EQ(simulation_spec(config, true).cluster.instances, 12);
}

TEST(Simulator, RefusesAsyncOnColocatedDevices) {
  const TrainConfig config =
      small_cluster({"placement.mode=colocated", "placement.train.dp=4", "placement.train.tp=1"});
  EXPECT_THROW(simulation_spec(config, true), Error);
  EXPECT_NO_THROW(simulation_spec(config, false));
}

TEST(Simulator, NamesAnUnknownModelOrDevice) {
  TrainConfig config = small_cluster();
  config.simulate.model = "no-such-model";
  try {
    simulation_spec(config, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "simulate.model");
  }
  config = small_cluster();
  config.simulate.device = "tpu-v9";
  EXPECT_THROW(simulation_spec(config, true), Error);
}

TEST(SimulatorReplay, GroupsTakeARunsRecordedLengths) {
  const std::string path = ::testing::TempDir() + "/aspen_replay_metrics.jsonl";
  {
    std::ofstream out(path);
    out << R"({"iteration": 1, "response_lengths": [[5, 7], [300, 2, 9]]})" << "\n"
        << R"({"eval_accuracy": 0.5})" << "\n"
        << R"({"iteration": 2, "response_lengths": [[11]]})" << "\n";
  }
  TrainConfig config = small_cluster({"simulate.replay=" + path, "rollout.max_tokens=100"});
  const SimulationSpec spec = simulation_spec(config, true);
  EXPECT_EQ(spec.lengths.group_lengths(0, 4), (std::vector<int64_t>{5, 7, 5, 7}));
  EXPECT_EQ(spec.lengths.group_lengths(1, 4), (std::vector<int64_t>{100, 2, 9, 100}));  // capped
  EXPECT_EQ(spec.lengths.group_lengths(2, 2), (std::vector<int64_t>{11, 11}));
  EXPECT_EQ(spec.lengths.group_lengths(3, 2), (std::vector<int64_t>{5, 7}));  // cycled
  const nlohmann::json run = run_simulation(spec);
  EXPECT_EQ(run["trained_rows"], 6 * 16 * 4);
}

TEST(SimulatorReplay, AFileWithoutRecordedLengthsIsRefusedNamingIt) {
  const std::string path = ::testing::TempDir() + "/aspen_replay_empty.jsonl";
  std::ofstream(path) << R"({"iteration": 1})" << "\n";
  try {
    simulation_spec(small_cluster({"simulate.replay=" + path}), true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.input().find("simulate.replay"), std::string::npos);
  }
}

// Sizes only a typo reaches are refused at once, naming the key, the bound and why,
// instead of a simulation that runs for days.
std::string size_error(const std::vector<std::string>& overrides) {
  try {
    simulation_spec(small_cluster(overrides), true);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Simulator, AbsurdSizesAreRefusedWithTheBoundAndItsReason) {
  for (const std::string key : {"train.iterations", "rollout.prompts_per_iteration",
                                "rollout.n", "placement.rollout.instances"}) {
    const std::string error = size_error({key + "=1000000000"});
    EXPECT_NE(error.find(key + ": is 1000000000, above aspen simulate's bound"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("(hint: "), std::string::npos) << error;  // the reason
  }
  EXPECT_NE(size_error({"simulate.memory_gb=1e300"}).find("simulate.memory_gb: is 1e+300 GB"),
            std::string::npos);
  // Within every per-key bound, but hours of simulation together.
  const std::string work = size_error({"train.iterations=10000", "rollout.prompts_per_iteration=4096"});
  EXPECT_NE(work.find("minutes of simulation"), std::string::npos) << work;
  // simulate.devices derives the instances: 2^20 - 4 of them are refused under that key.
  EXPECT_NE(size_error({"simulate.devices=1048576"}).find("simulate.devices: is 1048572"),
            std::string::npos);
  EXPECT_EQ(size_error({}), "");
}

int64_t trained_within(const nlohmann::json& result, int64_t eta) {
  int64_t rows = 0;
  for (const auto& [behind, count] : result["bubbles"]["staleness_histogram"].items()) {
    EXPECT_LE(std::stoi(behind), eta);
    rows += count.get<int64_t>();
  }
  return rows;
}

TEST(Simulator, OverSamplingAbortsStragglersSoTheLongTailNoLongerHoldsAnUpdate) {
  // One long group in 20 runs to 4096 tokens, six times the median: at eta 1 the window
  // waits for it; with over-sampling update i trains the first 16 groups scored.
  const std::vector<std::string> base = {"pipeline.max_staleness=1", "train.iterations=8"};
  std::vector<std::string> over = base;
  over.push_back("pipeline.over_sample=0.25");
  const nlohmann::json plain = run_simulation(simulation_spec(small_cluster(base), true));
  const nlohmann::json aborting = run_simulation(simulation_spec(small_cluster(over), true));
  EXPECT_EQ(plain["rollout"]["aborted_groups"], 0);
  EXPECT_GT(aborting["rollout"]["aborted_groups"].get<int64_t>(), 0);
  EXPECT_GT(aborting["rollout"]["aborted_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(trained_within(aborting, 1), 8 * 16 * 4);  // every batch whole, none too stale
  EXPECT_EQ(aborting["trained_rows"], 8 * 16 * 4);
  EXPECT_LT(aborting["seconds_per_step"].get<double>(), plain["seconds_per_step"].get<double>());
  // The aborted rows left the dock: allocated = retired + live.
  const nlohmann::json& dock = aborting["dock"];
  EXPECT_EQ(dock["rows_allocated"].get<int64_t>(),
            dock["rows_retired"].get<int64_t>() + dock["live_rows"].get<int64_t>());
  // The sync side is the baseline: no over-sampling there.
  EXPECT_EQ(run_simulation(simulation_spec(small_cluster(over), false))["rollout"]["aborted_groups"], 0);
}

TEST(Simulator, PartialRolloutsCutUnitsAtAWeightSwitchWhileAPeerIdlesAndResumeThem) {
  // Fewer groups than instances: some instance is idle at every weight switch.
  const std::vector<std::string> base = {"pipeline.max_staleness=1", "train.iterations=8",
                                         "rollout.prompts_per_iteration=2",
                                         "placement.rollout.instances=6"};
  std::vector<std::string> partial = base;
  partial.push_back("pipeline.partial_rollout=true");
  const nlohmann::json plain = run_simulation(simulation_spec(small_cluster(base), true));
  const nlohmann::json cut = run_simulation(simulation_spec(small_cluster(partial), true));
  EXPECT_EQ(plain["rollout"]["cut_units"], 0);
  const int64_t cuts = cut["rollout"]["cut_units"].get<int64_t>();
  EXPECT_GT(cuts, 0);
  EXPECT_GT(cut["rollout"]["cut_tokens"].get<int64_t>(), 0);
  // Every cut unit was resumed, but those still in the dock when the run ended.
  EXPECT_GT(cut["rollout"]["resumed_units"].get<int64_t>(), 0);
  EXPECT_LE(cut["rollout"]["resumed_units"].get<int64_t>(), cuts);
  EXPECT_EQ(trained_within(cut, 1), 8 * 2 * 4);  // staleness from the oldest token
  // The sync side never cuts.
  EXPECT_EQ(run_simulation(simulation_spec(small_cluster(partial), false))["rollout"]["cut_units"], 0);
}

TEST(Simulator, DrainingOnAnUpdateRunsThinnerBatchesThanInFlightUpdates) {
  const std::vector<std::string> base = {"pipeline.max_staleness=2", "train.iterations=8"};
  std::vector<std::string> drain = base;
  drain.push_back("simulate.drain_on_update=true");
  const nlohmann::json in_flight = run_simulation(simulation_spec(small_cluster(base), true));
  const nlohmann::json drained = run_simulation(simulation_spec(small_cluster(drain), true));
  EXPECT_EQ(drained["trained_rows"], 8 * 16 * 4);
  EXPECT_LT(drained["effective_tps"].get<double>(), in_flight["effective_tps"].get<double>());
  // A draining instance decodes its last sequences alone while groups wait for it.
  EXPECT_LT(drained["rollout"]["mean_batch"].get<double>(),
            in_flight["rollout"]["mean_batch"].get<double>());
}

TEST(Simulator, ToolLatencyIdlesTheSyncRolloutAndAsynchronyGainsMoreWithIt) {
  // Four turns per trajectory, tool calls of about 2 s between them.
  const std::vector<std::string> tools = {"simulate.turns=4", "simulate.tool_latency_ms=2000",
                                          "simulate.tool_latency_sigma=0.5",
                                          "simulate.observation_tokens=32"};
  const nlohmann::json plain = simulate_sync_and_async(small_cluster(), "");
  const nlohmann::json agentic = simulate_sync_and_async(small_cluster(tools), "");
  EXPECT_EQ(plain["async"]["rollout"]["tool_calls"], 0);
  EXPECT_EQ(plain["sync"]["bubbles"]["tool_wait"].get<double>(), 0.0);
  // Every trajectory calls its tools (samples shorter than four tokens call fewer).
  EXPECT_GT(agentic["sync"]["rollout"]["tool_calls"].get<int64_t>(), 6 * 16 * 4 * 2);
  EXPECT_EQ(agentic["sync"]["trained_rows"], 6 * 16 * 4);
  EXPECT_GT(agentic["sync"]["bubbles"]["tool_wait"].get<double>(), 0.0);
  EXPECT_LT(agentic["async"]["bubbles"]["tool_wait"].get<double>(),
            agentic["sync"]["bubbles"]["tool_wait"].get<double>());
  EXPECT_GT(agentic["ratio"].get<double>(), plain["ratio"].get<double>());
}

TEST(Simulator, MoreInstancesThanWorkRunsWithIdleInstances) {
  // 60 instances for 4 groups: most only load weights, which is no throughput to report.
  const nlohmann::json result = run_simulation(simulation_spec(
      small_cluster({"simulate.devices=64", "rollout.prompts_per_iteration=4",
                     "train.iterations=3"}),
      true));
  EXPECT_EQ(result["trained_rows"], 3 * 4 * 4);
}

}  // namespace
}  // namespace aspen::sim
