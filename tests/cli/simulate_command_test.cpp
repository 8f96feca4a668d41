// `aspen simulate` as a user runs it: a config with overrides, the Chrome trace of the
// simulated run, a sweep, and bad input named on one line.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <set>

#include "cli_test_util.h"

namespace aspen::testing {
namespace {

const std::string kAspen = ASPEN_CLI_PATH;
// Qwen2.5-7B on 8 H100s (2 x TP 2 training, 4 rollout), a few small steps.
const std::string kSmallRun =
    " simulate.model=qwen2.5-7b simulate.device=h100 simulate.devices=8"
    " placement.mode=disaggregated placement.train.dp=2 placement.train.tp=2"
    " placement.rollout.instances=4 rollout.prompts_per_iteration=16 rollout.n=4"
    " rollout.max_tokens=2048 simulate.length_median=400 train.iterations=4";

TEST(SimulateCommand, PrintsBothSidesAndWritesTheirTraces) {
  const std::string dir = scratch_dir();
  const CommandResult r =
      run_command(kAspen + " simulate" + kSmallRun + " --trace " + dir + "/sim.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_GT(out["sync"]["effective_tps"].get<double>(), 0.0);
  EXPECT_GT(out["async"]["effective_tps"].get<double>(), 0.0);
  EXPECT_EQ(out["cluster"]["async"]["devices"], 8);
  EXPECT_EQ(out["cluster"]["sync"]["colocated"], true);
  EXPECT_EQ(out["async"]["iterations"].size(), 4u);
  for (const std::string file : {"/sim.json", "/sim.sync.json"}) {
    const nlohmann::json trace = nlohmann::json::parse(read_text(dir + file));
    std::set<std::string> names;
    for (const auto& event : trace["traceEvents"]) {
      if (event["ph"] == "M" && event["name"] == "thread_name") {
        names.insert(event["args"]["name"].get<std::string>());
      }
    }
    EXPECT_TRUE(names.count("trainer")) << file;
    EXPECT_TRUE(names.count("rollout instance 0")) << file;
  }
}

// The setting `aspen simulate` runs without a config is the example file's, written twice
// (the binary cannot find the file wherever it runs): they must not drift apart.
TEST(SimulateCommand, WithoutAConfigItSimulatesTheSeedsExampleFile) {
  const CommandResult builtin = run_command(kAspen + " simulate train.iterations=2 --json");
  const CommandResult file = run_command(kAspen + " simulate " + std::string(ASPEN_SOURCE_DIR) +
                                         "/examples/simulate/qwen2.5-7b.yaml train.iterations=2 --json");
  ASSERT_EQ(builtin.exit_code, 0) << builtin.err;
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(nlohmann::json::parse(builtin.out), nlohmann::json::parse(file.out));
}

TEST(SimulateCommand, SweepTabulatesEveryValueAndNamesTheBest) {
  const CommandResult r =
      run_command(kAspen + " simulate" + kSmallRun + " --sweep pipeline.max_staleness=0,1,2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["sweep"], "pipeline.max_staleness");
  ASSERT_EQ(out["rows"].size(), 3u);
  EXPECT_EQ(out["rows"][2]["value"], "2");
  EXPECT_TRUE(out["best_async"].contains("value"));
}

TEST(SimulateCommand, BadInputIsOneLineNamingIt) {
  CommandResult r = run_command(kAspen + " simulate" + kSmallRun + " simulate.device=tpu");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("simulate.device"), std::string::npos) << r.err;
  r = run_command(kAspen + " simulate" + kSmallRun + " --sweep pipeline.max_staleness");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--sweep"), std::string::npos) << r.err;
  r = run_command(kAspen + " simulate" + kSmallRun + " simulate.train_mfu=1.5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("simulate.train_mfu"), std::string::npos) << r.err;
}

TEST(SimulateCommand, ATraceThatIsNotAFileIsRefusedBeforeSimulating) {
  const std::string dir = scratch_dir();
  const std::string fifo = dir + "/trace.json";
  ASSERT_EQ(run_command("mkfifo " + fifo).exit_code, 0);
  // train.iterations=100000 would simulate for hours: the trace is refused first.
  for (const std::string& trace : {dir, fifo}) {
    const CommandResult r = run_command(kAspen + " simulate" + kSmallRun +
                                        " train.iterations=100000 --trace " + trace);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--trace " + trace + ": is a"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const CommandResult sweep = run_command(kAspen + " simulate" + kSmallRun +
                                          " --sweep rollout.n=2,4 --trace " + dir + "/t.json");
  EXPECT_NE(sweep.exit_code, 0);
  EXPECT_NE(sweep.err.find("--trace"), std::string::npos) << sweep.err;
}

TEST(SimulateCommand, AnAbsurdSizeFailsAtOnceNamingTheKey) {
  const CommandResult r =
      run_command(kAspen + " simulate" + kSmallRun + " rollout.prompts_per_iteration=1000000000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rollout.prompts_per_iteration: is 1000000000, above"), std::string::npos)
      << r.err;
  // A sweep checks every value before simulating the first.
  const CommandResult sweep =
      run_command(kAspen + " simulate" + kSmallRun + " --sweep train.iterations=4,1000000000");
  EXPECT_NE(sweep.exit_code, 0);
  EXPECT_NE(sweep.err.find("train.iterations: is 1000000000"), std::string::npos) << sweep.err;
}

TEST(SimulateCommand, ComparePpTabulatesTheTrainersSplits) {
  // The small run's 2 x TP 2 trainers: each replica's 2 devices as TP 2 or PP 2.
  const CommandResult r =
      run_command(kAspen + " simulate" + kSmallRun + " rollout.max_tokens=512 --compare-pp 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["layouts"].size(), 2u) << r.out;
  // In tp order: TP 1 x PP 2, then TP 2 x PP 1.
  EXPECT_EQ(out["layouts"][0]["pp"], 2);
  EXPECT_GT(out["layouts"][0]["bubble"].get<double>(), 0.0);
  EXPECT_GT(out["layouts"][0]["p2p_s"].get<double>(), 0.0);
  EXPECT_EQ(out["layouts"][1]["bubble"], 0.0);
  EXPECT_TRUE(out["best"].contains("pp")) << r.out;
  const CommandResult both =
      run_command(kAspen + " simulate" + kSmallRun +
                  " rollout.max_tokens=512 --compare-pp 2 --sweep train.epochs=1,2");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--compare-pp"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace aspen::testing
