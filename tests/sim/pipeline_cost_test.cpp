// The trainer's pipeline-parallel cost (cost_model.h) on numbers worked by hand, and the
// tp x pp comparison (trainer_layouts.h): PP pays its bubble and p2p, TP its
// collectives, and the cheaper one wins where it should.
#include <gtest/gtest.h>

#include "aspen/config/train_config.h"
#include "aspen/sim/cost_model.h"
#include "aspen/sim/trainer_layouts.h"
#include "aspen/util/config.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

// Round numbers: 1e6 matmul parameters, hidden 1000, no attention term; a device of
// 1 TFLOP/s at full MFU, 1 GB/s links, no latency.
ModelCost round_model() {
  ModelCost m;
  m.layers = 4;
  m.hidden = 1000;
  m.parameters = 1e6;
  m.matmul_parameters = 1e6;
  return m;
}

DevicePreset round_device() {
  DevicePreset d;
  d.name = "round";
  d.peak_flops = 1e12;
  d.memory_bandwidth = 1e12;
  d.memory_bytes = 1e12;
  d.link_bandwidth = 1e9;
  d.network_bandwidth = 1e8;
  d.devices_per_node = 8;
  d.train_mfu = 1.0;
  d.collective_latency_s = 0;
  return d;
}

ClusterShape stages(int pp, int64_t micro_batch_tokens) {
  ClusterShape c;
  c.train_pp = pp;
  c.train_micro_batch_tokens = micro_batch_tokens;
  return c;
}

TEST(PipelineCost, OneStageIsTheWholeModelsWork) {
  const CostModel costs(round_model(), round_device(), stages(1, 250));
  // 6 N T = 6e9 FLOPs at 1e12.
  EXPECT_NEAR(costs.train_s(1000, 0), 6e-3, 1e-12);
  const TrainerPassCost pass = costs.train_pass(1000, 0);
  EXPECT_EQ(pass.micro_batches, 1);
  EXPECT_EQ(pass.bubble, 0.0);
  EXPECT_EQ(pass.p2p_s, 0.0);
}

TEST(PipelineCost, TwoStagesPayTheOneFOneBBubbleAndTheirMessages) {
  const CostModel costs(round_model(), round_device(), stages(2, 250));
  // 1000 tokens in 250-token micro-batches: m = 4, 5 slots each way.
  const TrainerPassCost pass = costs.train_pass(1000, 0);
  EXPECT_EQ(pass.micro_batches, 4);
  EXPECT_DOUBLE_EQ(pass.bubble, 1.0 / 5.0);
  EXPECT_NEAR(pass.compute_s, 6e9 / 2e12, 1e-12);         // half the layers per device
  EXPECT_NEAR(pass.bubble_s, 3e-3 * 1.0 / 4.0, 1e-12);     // W (p - 1) / m
  // A message: 250 tokens x 1000 x 2 bytes = 5e5 bytes at 1e9 B/s; 5 slots x 2 ways.
  EXPECT_NEAR(pass.p2p_s, 5 * 2 * 5e-4, 1e-12);
  EXPECT_NEAR(costs.train_s(1000, 0), 3e-3 + 0.75e-3 + 5e-3, 1e-12);
  // The bubble is that fraction of the pipelined compute.
  EXPECT_NEAR(pass.bubble_s / (pass.compute_s + pass.bubble_s), pass.bubble, 1e-12);
  // Forward-only passes send activations one way: 5 messages, 2 N T FLOPs.
  const TrainerPassCost forward = costs.forward_pass(1000, 0);
  EXPECT_NEAR(forward.p2p_s, 5 * 5e-4, 1e-12);
  EXPECT_NEAR(costs.forward_s(1000, 0), 1e-3 + 0.25e-3 + 2.5e-3, 1e-12);
}

TEST(PipelineCost, EveryOptimizerStepFlushesThePipeline) {
  const CostModel costs(round_model(), round_device(), stages(2, 250));
  // Two steps of 500 tokens: m = 2 each, W = 1.5e-3, bubble W / 2, 3 slots x 2 messages.
  EXPECT_NEAR(costs.train_s(1000, 0, 2), 2 * (1.5e-3 + 0.75e-3 + 3 * 2 * 5e-4), 1e-12);
}

TEST(PipelineCost, AFixedMicroBatchCountOverridesTheTokenBudget) {
  ClusterShape cluster = stages(4, 250);
  cluster.train_micro_batches = 8;
  const TrainerPassCost pass = CostModel(round_model(), round_device(), cluster).train_pass(1000, 0);
  EXPECT_EQ(pass.micro_batches, 8);
  EXPECT_DOUBLE_EQ(pass.bubble, 3.0 / 11.0);
  // 125-token messages over 11 slots.
  EXPECT_NEAR(pass.p2p_s, 11 * 2 * 125 * 1000 * 2 / 1e9, 1e-12);
}

TEST(PipelineCost, StagesSplitTheStateAndGoOverTheNetworkPastANode) {
  const CostModel one(round_model(), round_device(), stages(1, 250));
  const CostModel two(round_model(), round_device(), stages(2, 250));
  EXPECT_DOUBLE_EQ(two.trainer_state_bytes(), one.trainer_state_bytes() / 2);
  EXPECT_DOUBLE_EQ(two.optimizer_step_s(), one.optimizer_step_s() / 2);
  // 16 stages of 1 device on 8-device nodes: the messages cross the network (10x slower).
  ClusterShape wide = stages(16, 250);
  ClusterShape narrow = stages(8, 250);
  const double wide_p2p = CostModel(round_model(), round_device(), wide).train_pass(1000, 0).p2p_s;
  const double narrow_p2p =
      CostModel(round_model(), round_device(), narrow).train_pass(1000, 0).p2p_s;
  EXPECT_NEAR(wide_p2p, 19 * 2 * 5e-4 * 10, 1e-12);
  EXPECT_NEAR(narrow_p2p, 11 * 2 * 5e-4, 1e-12);
  // TP past a node all-reduces over the network too.
  ClusterShape tp8, tp16;
  tp8.train_tp = 8;
  tp16.train_tp = 16;
  const double tp8_comm = CostModel(round_model(), round_device(), tp8).train_pass(1000, 0).tp_comm_s;
  const double tp16_comm =
      CostModel(round_model(), round_device(), tp16).train_pass(1000, 0).tp_comm_s;
  // 4 collectives x 4 layers x 2 (tp-1)/tp x 1000 x 1000 x 2 bytes.
  EXPECT_NEAR(tp8_comm, 16 * 2 * 7.0 / 8 * 2e6 / 1e9, 1e-12);
  EXPECT_NEAR(tp16_comm, 16 * 2 * 15.0 / 16 * 2e6 / 1e8, 1e-12);
}

TEST(PipelineCost, BadMicroBatchSettingsAreRefused) {
  ClusterShape cluster = stages(2, 0);
  EXPECT_THROW(CostModel(round_model(), round_device(), cluster), Error);
  cluster = stages(0, 250);
  EXPECT_THROW(CostModel(round_model(), round_device(), cluster), Error);
}

// Qwen2.5-32B (40 heads, 8 KV heads, 64 layers) on H200s, one step of 256 rows.
TrainConfig layouts_config(const std::vector<std::string>& overrides) {
  Config config = Config::parse(
      "simulate: {model: qwen2.5-32b, device: h200, length_median: 300, length_sigma: 0.5, "
      "prompt_tokens: 256}\n"
      "placement: {mode: disaggregated, train: {dp: 2, tp: 8}, rollout: {instances: 4, tp: 4}}\n"
      "rollout: {prompts_per_iteration: 32, n: 8, max_tokens: 512}\n",
      "test config");
  for (const std::string& assignment : overrides) config.apply_override(assignment);
  return parse_train_config(config);
}

double step_of(const nlohmann::json& layout) {
  return layout["step_s"].get<double>() + layout["optimizer_s"].get<double>();
}

TEST(TrainerLayouts, ListsEverySplitAndNamesTheFastestThatFits) {
  const nlohmann::json out = compare_trainer_layouts(layouts_config({}), 8);
  ASSERT_EQ(out["layouts"].size(), 4u) << out.dump();  // 1x8, 2x4, 4x2, 8x1
  EXPECT_EQ(out["dp"], 2);
  double fastest = 1e300;
  for (const auto& layout : out["layouts"]) {
    EXPECT_EQ(layout["tp"].get<int>() * layout["pp"].get<int>(), 8);
    if (layout["fits"].get<bool>()) fastest = std::min(fastest, step_of(layout));
    if (layout["pp"] == 1) EXPECT_EQ(layout["bubble"], 0.0);
  }
  EXPECT_DOUBLE_EQ(out["best"]["step_s"].get<double>() + out["best"]["optimizer_s"].get<double>(),
                   fastest);
  // 16 devices: TP 16 does not divide the 40 heads.
  const nlohmann::json wide = compare_trainer_layouts(layouts_config({}), 16);
  ASSERT_EQ(wide["skipped"].size(), 1u) << wide.dump();
  EXPECT_EQ(wide["skipped"][0]["tp"], 16);
  EXPECT_THROW(compare_trainer_layouts(layouts_config({}), 0), Error);
}

TEST(TrainerLayouts, PipelineWinsWhenTensorParallelismCrossesNodes) {
  // 4-device nodes: TP 8 all-reduces over the network, PP 2 x TP 4 stays inside a node
  // for its collectives and sends only activations between the two.
  const nlohmann::json out =
      compare_trainer_layouts(layouts_config({"simulate.devices_per_node=4"}), 8);
  EXPECT_GT(out["best"]["pp"].get<int>(), 1) << out.dump(2);
}

TEST(TrainerLayouts, TensorParallelismWinsWithOneMicroBatch) {
  // One micro-batch per step (a budget above the step's tokens): a pipeline of p stages
  // idles (p - 1) / p of the time, while TP inside an NVLink node costs a few percent.
  const nlohmann::json out =
      compare_trainer_layouts(layouts_config({"train.micro_batch_tokens=100000000"}), 8);
  EXPECT_EQ(out["best"]["pp"], 1) << out.dump(2);
  for (const auto& layout : out["layouts"]) EXPECT_EQ(layout["micro_batches"], 1);
}

TEST(TrainerLayouts, SimulateMicroBatchesFixesEveryPipelinesCount) {
  const nlohmann::json out =
      compare_trainer_layouts(layouts_config({"simulate.micro_batches=8"}), 8);
  for (const auto& layout : out["layouts"]) {
    const double pp = layout["pp"].get<double>();
    if (pp == 1) continue;
    EXPECT_EQ(layout["micro_batches"], 8);
    EXPECT_DOUBLE_EQ(layout["bubble"].get<double>(), (pp - 1) / (8 + pp - 1));
  }
  EXPECT_THROW(layouts_config({"simulate.micro_batches=-1"}), Error);
}

}  // namespace
}  // namespace aspen::sim
