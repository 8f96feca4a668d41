// `aspen launch -- aspen train` through the real binaries: a two-rank run (two rollout
// instances, data-parallel trainer, distributed dock, resharder publish, swap) trains
// like one process on the same global batch, and unsupported placements are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/io/model_dir.h"
#include "aspen/pipeline/rl_run.h"
#include "run_command.h"

namespace aspen {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

const std::string kAspen = ASPEN_CLI_PATH;

// A 1-layer model that SFT brings to ~30% on 1-digit addition, so rewards vary within
// groups and every update has a real gradient (not Adam-amplified rounding noise).
std::string tiny_run(const std::string& extra) {
  return "model.hidden_size=32 model.num_layers=1 model.head_dim=8 model.intermediate_size=64 "
         "train.sft_steps=300 train.sft_lr=5e-3 train.sft_batch_size=8 train.iterations=3 "
         "rollout.n=4 rollout.prompts_per_iteration=4 data.train_size=200 data.eval_size=16 "
         "'data.task_options={digits: 1}' logging.console=false logging.eval_every=0 "
         "train.lr=1e-3 " + extra;
}

std::string out_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("aspen_ranks_" + name);
  fs::remove_all(dir);
  return dir.string();
}

void expect_same_training(const std::string& one, const std::string& two) {
  const auto a = read_rl_metrics(one);
  const auto b = read_rl_metrics(two);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size());
  double gradient = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    // The same samples: sampling is seeded per group and sample, whichever rank runs it.
    EXPECT_EQ(b[i]["reward_mean"], a[i]["reward_mean"]) << "iteration " << i;
    EXPECT_EQ(b[i]["response_length_mean"], a[i]["response_length_mean"]) << "iteration " << i;
    EXPECT_EQ(b[i]["trained_rows"], a[i]["trained_rows"]) << "iteration " << i;
    EXPECT_EQ(b[i]["trained_tokens"], a[i]["trained_tokens"]) << "iteration " << i;
    // The same update: global denominators and summed gradients over the two shares.
    EXPECT_NEAR(b[i]["grad_norm"].get<double>(), a[i]["grad_norm"].get<double>(),
                1e-4 * (1.0 + a[i]["grad_norm"].get<double>()))
        << "iteration " << i;
    EXPECT_EQ(b[i]["ranks"], 2);
    gradient += a[i]["grad_norm"].get<double>();
  }
  EXPECT_GT(gradient, 0.1) << "the comparison needs updates that move the weights";
  const auto wa = load_model_weights(one + "/final");
  const auto wb = load_model_weights(two + "/final");
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, tensor] : wa) {
    EXPECT_TRUE(torch::allclose(wb.at(name), tensor, 1e-4, 1e-4)) << name;
  }
}

void run_pair(const std::string& name, const std::string& config) {
  const std::string one = out_dir(name + "_one");
  const std::string two = out_dir(name + "_two");
  const auto single = run_command(kAspen + " train " + config + " --out " + one);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ranks = run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " +
                                 kAspen + " train " + config +
                                 " placement.train.dp=2 placement.rollout.instances=2 --out " + two);
  ASSERT_EQ(ranks.exit_code, 0) << ranks.output;
  // Rank 0 alone reports.
  const size_t first = ranks.output.find("== summary ==");
  ASSERT_NE(first, std::string::npos) << ranks.output;
  EXPECT_EQ(ranks.output.find("== summary ==", first + 1), std::string::npos) << ranks.output;
  expect_same_training(one, two);
}

TEST(TrainAcrossRanks, TwoRanksGrpoTrainsLikeOneProcess) { run_pair("grpo", tiny_run("")); }

TEST(TrainAcrossRanks, TwoRanksPpoWithCriticKlAndSwapTrainsLikeOneProcess) {
  // Critic values, reference log-probs, KL in the reward (its controller on rank 0) and
  // the optimizer state swapped out during every rollout after the first update.
  run_pair("ppo", tiny_run("algorithm.name=ppo algorithm.kl_in_reward=true "
                           "algorithm.kl_coef=0.01 placement.swap=true"));
}

TEST(TrainAcrossRanks, SwapMovesTheOptimizerStateOutDuringRollout) {
  const std::string dir = out_dir("swap");
  const auto result = run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " +
                                  kAspen + " train " + tiny_run("placement.swap=true") +
                                  " placement.train.dp=2 placement.rollout.instances=2 --out " +
                                  dir);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto lines = read_rl_metrics(dir);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["swapped_bytes"], 0) << "AdamW has no moments before its first step";
  // Two fp32 moments per parameter of the 1-layer model.
  EXPECT_GT(lines[1]["swapped_bytes"].get<int64_t>(), 100000);
  EXPECT_EQ(lines[2]["swapped_bytes"], lines[1]["swapped_bytes"]);
}

TEST(TrainAcrossRanks, UnsupportedPlacementsAreRefusedNamingTheField) {
  const std::string launch = kAspen + " launch --nproc-per-node 2 --master-port 0 -- " + kAspen +
                             " train " + tiny_run("") + " --out " + out_dir("refused");
  auto tp = run_command(launch + " placement.train.tp=2 placement.rollout.instances=2");
  EXPECT_NE(tp.exit_code, 0);
  EXPECT_NE(tp.output.find("placement.train.tp"), std::string::npos) << tp.output;
  auto dp = run_command(launch);  // the default one-rank placement under two ranks
  EXPECT_NE(dp.exit_code, 0);
  EXPECT_NE(dp.output.find("placement.train.dp"), std::string::npos) << dp.output;
  auto async = run_command(launch +
                           " placement.train.dp=2 placement.rollout.instances=2 pipeline.mode=async");
  EXPECT_NE(async.exit_code, 0);
  EXPECT_NE(async.output.find("pipeline.mode"), std::string::npos) << async.output;
  // A two-rank placement without aspen launch.
  auto alone = run_command(kAspen + " train " + tiny_run("") +
                           " placement.train.dp=2 placement.rollout.instances=2 --out " +
                           out_dir("alone"));
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.output.find("aspen launch --nproc-per-node 2"), std::string::npos)
      << alone.output;
}

}  // namespace
}  // namespace aspen
