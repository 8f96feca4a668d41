// The asynchronous iteration engine across processes, through the real binaries
// (`aspen launch -- aspen train`): eta = 0 trains like the one-process synchronous
// run on the disaggregated (1 trainer + 2 instance ranks, TP or PP trainers, TP
// instances) and colocated (DP 2) layouts; the staleness bound holds and no group is
// lost or trained twice with jittery instances (one trainer, and two pipeline stages); a SIGKILLed instance rank loses nothing under `regenerate` and
// stops the run naming the rank under `stop`; the dispatcher's view of the instances'
// queues stays fresh.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "aspen/io/model_dir.h"
#include "aspen/pipeline/rl_run.h"
#include "parallel/binaries.h"
#include "parallel/rank_runs.h"
#include "run_command.h"

namespace aspen::parallel {

using namespace aspen::io;
using namespace aspen::pipeline;

namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::tiny_rank_run;
using testing::tp_rank_run;

const std::string kDisaggregated =
    "placement.mode=disaggregated placement.train.dp=1 placement.rollout.instances=2";

std::string out_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("aspen_async_ranks_" + name);
  fs::remove_all(dir);
  return dir.string();
}

testing::CommandResult launch(int ranks, const std::string& config, const std::string& dir,
                              const std::string& launch_flags = "",
                              const std::string& environment = "") {
  return run_command(environment + " " + kAspen + " launch --nproc-per-node " +
                     std::to_string(ranks) + " --master-port 0 " + launch_flags + " -- " + kAspen +
                     " train " + config + " --out " + dir);
}

// Rank 0's trace holds every rank's timeline: a process row per rank, a track per
// role and rollout instance, and generate steps on every instance.
void expect_one_trace_with_a_row_per_rank(const std::string& path, int ranks,
                                          const std::vector<int>& instance_ranks) {
  std::ifstream in(path);
  ASSERT_TRUE(static_cast<bool>(in)) << path;
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::pair<int64_t, int64_t>, std::string> tracks;
  std::set<std::string> processes;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "M") continue;
    if (event["name"] == "thread_name")
      tracks[{event["pid"], event["tid"]}] = event["args"]["name"];
    if (event["name"] == "process_name") processes.insert(event["args"]["name"]);
  }
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(processes.count("rank " + std::to_string(r)), 1u) << r;
  std::map<std::string, int> spans;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X")
      ++spans[tracks.at({event["pid"], event["tid"]}) + "/" + event["name"].get<std::string>()];
  }
  EXPECT_EQ(spans["trainer (rank 0)/update"], 3);
  for (size_t instance = 0; instance < instance_ranks.size(); ++instance) {
    EXPECT_GT(spans["rollout instance " + std::to_string(instance) + " (rank " +
                    std::to_string(instance_ranks[instance]) + ")/generate step"],
              0)
        << instance;
  }
  EXPECT_FALSE(fs::exists(path + ".rank-1")) << "merged parts are removed";
}

void expect_trains_like_one_process_sync(const std::string& name, int ranks,
                                         const std::string& placement,
                                         const std::vector<int>& instance_ranks,
                                         std::string (*run)(const std::string&) = tiny_rank_run) {
  const std::string one = out_dir(name + "_sync");
  const std::string many = out_dir(name + "_async");
  const auto single = run_command(kAspen + " train " + run("pipeline.mode=sync") + " --out " + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string trace = many + "_trace.json";
  const auto launched = launch(
      ranks,
      run("pipeline.mode=async pipeline.max_staleness=0 " + placement + " logging.trace=" + trace),
      many);
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  expect_one_trace_with_a_row_per_rank(trace, ranks, instance_ranks);
  testing::expect_same_training(one, many, ranks);
  for (const auto& line : read_rl_metrics(many)) {
    EXPECT_EQ(line["bubbles"]["staleness_histogram"], nlohmann::json({{"0", 16}}));
  }
}

TEST(AsyncAcrossRanks, ZeroStalenessOneTrainerTwoInstanceRanksTrainsLikeOneProcessSync) {
  expect_trains_like_one_process_sync("disaggregated", 3, kDisaggregated, {1, 2});
}

// Training ranks as a TP 2 grid: the trainers gather their shards into the full
// policy after each update (for evaluation, export and the instance's weights).
TEST(AsyncAcrossRanks, ZeroStalenessTensorParallelTrainersAndOneInstanceTrainLikeOneProcessSync) {
  expect_trains_like_one_process_sync(
      "tp2", 3, "placement.mode=disaggregated placement.train.tp=2 placement.rollout.instances=1",
      {2}, tp_rank_run);
}

// A tensor-parallel rollout instance: its two ranks step one engine replica together,
// the leader's plans keeping them in step.
TEST(AsyncAcrossRanks, ZeroStalenessOneTrainerAndATensorParallelInstanceTrainLikeOneProcessSync) {
  expect_trains_like_one_process_sync(
      "rollout_tp2", 3,
      "placement.mode=disaggregated placement.train.dp=1 placement.rollout.instances=1 "
      "placement.rollout.tp=2",
      {1}, tp_rank_run);
}

// The ASP pipeline with a pipeline-parallel trainer: two stages (ranks 0, 1) train by
// 1F1B without streaming (several trainers never stream: the whole batch, then one
// update) and gather their layers into the full policy after each update; a
// tensor-parallel instance (ranks 2, 3) generates with it.
TEST(AsyncAcrossRanks, ZeroStalenessPipelineParallelTrainersAndATensorParallelInstanceTrainLikeOneProcessSync) {
  expect_trains_like_one_process_sync(
      "pp2", 4,
      "placement.mode=disaggregated placement.train.pp=2 placement.rollout.instances=1 "
      "placement.rollout.tp=2",
      {2}, tp_rank_run);
}

TEST(AsyncAcrossRanks, ZeroStalenessColocatedDataParallelTwoTrainsLikeOneProcessSync) {
  expect_trains_like_one_process_sync("colocated", 2,
                                      "placement.train.dp=2 placement.rollout.instances=2", {0, 1});
}

// Every trained group once; what was drawn and not trained is at most the admission
// window, all of it above the trained groups' ids minus that window.
void expect_each_group_trained_once(const std::vector<nlohmann::json>& lines, int64_t eta,
                                    int64_t batch) {
  std::set<int64_t> trained;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["trained_groups"], batch) << "iteration " << i;
    for (int64_t group : lines[i]["batch_groups"]) {
      EXPECT_TRUE(trained.insert(group).second) << "group " << group << " trained twice";
    }
    for (const auto& [behind, rows] : lines[i]["bubbles"]["staleness_histogram"].items()) {
      EXPECT_GE(std::stoll(behind), 0) << "iteration " << i;
      EXPECT_LE(std::stoll(behind), eta) << "iteration " << i;
    }
  }
  ASSERT_FALSE(trained.empty());
  int64_t missing = 0;
  for (int64_t g = 0; g < *trained.rbegin(); ++g) missing += trained.count(g) == 0 ? 1 : 0;
  EXPECT_LE(missing, (eta + 1) * batch) << "groups were lost";
}

TEST(AsyncAcrossRanks, StalenessBoundHoldsAndNoGroupIsLostOrTrainedTwiceWithJitteryInstances) {
  // eta 1 and 2; eta 1 again with in-flight samples interrupted and resumed on every
  // new weight version, and with groups split into single-sample dispatch chunks.
  struct Case {
    int64_t eta;
    std::string extra;
  };
  for (const Case& c : std::vector<Case>{
           {1, ""}, {2, ""}, {1, "pipeline.interrupt=true"}, {1, "pipeline.dispatch_chunk=1"}}) {
    SCOPED_TRACE("eta " + std::to_string(c.eta) + " " + c.extra);
    const std::string dir = out_dir("jitter_" + std::to_string(c.eta));
    const auto launched =
        launch(3,
               tiny_rank_run("pipeline.mode=async train.iterations=8 rollout.max_tokens=12 "
                             "pipeline.dispatch=round_robin pipeline.max_staleness=" +
                             std::to_string(c.eta) + " " + c.extra + " " + kDisaggregated),
               dir, "", "ASPEN_FAULT_STEP_DELAY_MS=20");
    ASSERT_EQ(launched.exit_code, 0) << launched.output;
    const auto lines = read_rl_metrics(dir);
    ASSERT_EQ(lines.size(), 8u);
    expect_each_group_trained_once(lines, c.eta, 4);
    for (const auto& line : lines) {
      // The dispatcher's view: status_period_s (0.05) + one engine step (<= 20 ms of
      // injected delay + a few ms here) + a dock round trip, with room for scheduling
      // three processes on two cores.
      EXPECT_LE(line["instance_status_age_max_s"].get<double>(), 1.0);
    }
  }
}

// Stale rows on pipeline stages: with eta 1 and jittery instances the two stages train
// batches of rows up to one version old (the recomputed proximal log-probs through the
// stages' forward-only pass), and no group is lost or trained twice.
TEST(AsyncAcrossRanks, PipelineParallelTrainersKeepTheStalenessBoundAndLoseNoGroup) {
  const std::string dir = out_dir("pp2_jitter");
  const auto launched =
      launch(3,
             tp_rank_run("pipeline.mode=async train.iterations=6 pipeline.max_staleness=1 "
                         "pipeline.dispatch=round_robin placement.mode=disaggregated "
                         "placement.train.pp=2 placement.rollout.instances=1"),
             dir, "", "ASPEN_FAULT_STEP_DELAY_MS=20");
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  const auto lines = read_rl_metrics(dir);
  ASSERT_EQ(lines.size(), 6u);
  expect_each_group_trained_once(lines, 1, 4);
  int64_t stale = 0;
  double gradient = 0.0;
  for (const auto& line : lines) {
    stale += line["bubbles"]["staleness_histogram"].value("1", int64_t{0});
    gradient += line["grad_norm"].get<double>();
    EXPECT_TRUE(std::isfinite(line["reward_mean"].get<double>()));
  }
  EXPECT_GT(stale, 0) << "eta 1 with a free-running instance trains some stale rows";
  EXPECT_GT(gradient, 0.0) << "the stages trained";
  EXPECT_TRUE(fs::exists(dir + "/final/model.safetensors"));
}

TEST(AsyncAcrossRanks, KilledInstanceRankLosesNothingUnderRegenerate) {
  const std::string dir = out_dir("kill_regenerate");
  const auto launched = launch(
      3,
      tiny_rank_run("pipeline.mode=async train.iterations=8 rollout.max_tokens=12 "
                    "pipeline.max_staleness=1 pipeline.instance_timeout_s=2 "
                    "pipeline.dispatch=round_robin pipeline.on_instance_failure=regenerate " +
                    kDisaggregated),
      dir, "--tolerate-exit 1,2",
      // Round robin gives instance 1 (rank 2) the second group at once: it dies
      // in its third step, holding it.
      "ASPEN_FAULT_STEP_DELAY_MS=10 ASPEN_FAULT_SIGKILL_RANK=2 "
      "ASPEN_FAULT_SIGKILL_AFTER_STEPS=3");
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  EXPECT_NE(launched.output.find("rank 2 killed by signal 9"), std::string::npos)
      << launched.output;
  const auto lines = read_rl_metrics(dir);
  ASSERT_EQ(lines.size(), 8u);
  expect_each_group_trained_once(lines, 1, 4);
  EXPECT_EQ(lines.back()["failed_instances"], 1) << launched.output;
  EXPECT_TRUE(fs::exists(dir + "/final/model.safetensors"));
}

TEST(AsyncAcrossRanks, KilledInstanceRankStopsTheRunNamingItUnderStop) {
  const std::string dir = out_dir("kill_stop");
  const auto launched =
      launch(3,
             tiny_rank_run("pipeline.mode=async train.iterations=50 rollout.max_tokens=12 "
                           "pipeline.instance_timeout_s=2 pipeline.dispatch=round_robin "
                           "pipeline.on_instance_failure=stop " +
                           kDisaggregated),
             dir, "--tolerate-exit 1,2",
             "ASPEN_FAULT_STEP_DELAY_MS=10 ASPEN_FAULT_SIGKILL_RANK=2 "
             "ASPEN_FAULT_SIGKILL_AFTER_STEPS=3");
  EXPECT_NE(launched.exit_code, 0) << launched.output;
  EXPECT_LT(launched.seconds, 60.0);  // SFT and start-up included
  EXPECT_NE(launched.output.find("rollout instance 1 on rank 2"), std::string::npos)
      << launched.output;
  EXPECT_NE(launched.output.find("pipeline.on_instance_failure"), std::string::npos)
      << launched.output;
}

}  // namespace
}  // namespace aspen::parallel
