// The simulator's LoRA (issue #38; sim/model_cost.h, sim/cost_model.h): the adapter
// count equals a built model's adapters, the training FLOPs split forward / activation
// gradients / weight gradients (LoRA ~2/3 of full fine-tuning), and the optimizer,
// the trainer's state and the publish see the adapters only.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "aspen/io/model_shapes.h"
#include "aspen/model/lora.h"
#include "aspen/model/weights_init.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/sim/cost_model.h"
#include "aspen/sim/model_cost.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

ModelConfig lora_test_model(BuiltinModelKind kind) {
  ModelSection section;
  section.kind = kind;
  return builtin_model_config(section, 300);
}

LoraShape shape_of(const LoraOptions& options) {
  return {options.rank, options.targets, options.experts};
}

// Adapters of the model built and given `options`: every one, and those a token passes
// (a routed expert's k / E).
void expect_adapters_match(const ModelConfig& config, const LoraOptions& options) {
  QwenForCausalLM model = make_random_model(config, 7);
  model->attach_lora(options);
  double all = 0, matmul = 0;
  for (const auto& [name, tensor] : model->lora_state()) {
    const auto numel = static_cast<double>(tensor.numel());
    all += numel;
    const bool expert = name.find(".mlp.experts.") != std::string::npos;
    matmul += expert ? numel * static_cast<double>(config.moe.num_experts_per_tok) /
                           static_cast<double>(config.moe.num_experts)
                     : numel;
  }
  ASSERT_GT(all, 0);
  const ModelCost cost = model_cost(config, shape_of(options));
  EXPECT_EQ(cost.adapter_parameters, all) << config.model_type();
  EXPECT_DOUBLE_EQ(cost.adapter_matmul_parameters, matmul) << config.model_type();
  EXPECT_EQ(cost.trainable_parameters(), all);
}

LoraOptions lora_of_rank(int64_t r, std::vector<std::string> targets = lora_target_names()) {
  LoraOptions options;
  options.rank = r;
  options.targets = std::move(targets);
  return options;
}

TEST(LoraCost, DenseQwen3AdaptersEqualTheBuiltModels) {
  expect_adapters_match(lora_test_model(BuiltinModelKind::kQwen3), lora_of_rank(8));
  expect_adapters_match(lora_test_model(BuiltinModelKind::kQwen3),
                        lora_of_rank(4, {"q_proj", "v_proj"}));
}

TEST(LoraCost, MoeAdaptersCountRoutedExpertsOnlyWhenAsked) {
  LoraOptions options = lora_of_rank(4);
  expect_adapters_match(lora_test_model(BuiltinModelKind::kQwen3Moe), options);
  options.experts = true;
  expect_adapters_match(lora_test_model(BuiltinModelKind::kQwen3Moe), options);
}

TEST(LoraCost, DeepseekV3SharedExpertAdaptersEqualTheBuiltModels) {
  LoraOptions options = lora_of_rank(4, {"gate_proj", "up_proj", "down_proj"});
  expect_adapters_match(lora_test_model(BuiltinModelKind::kDeepseekV3), options);
  options.experts = true;
  expect_adapters_match(lora_test_model(BuiltinModelKind::kDeepseekV3), options);
}

TEST(LoraCost, AttentionTargetsOnLatentAttentionAreAnError) {
  EXPECT_THROW(
      model_cost(lora_test_model(BuiltinModelKind::kDeepseekV3), shape_of(lora_of_rank(4))),
      Error);
}

TEST(LoraCost, Qwen3ShapeAtRank16HasTheAdaptersAPublishMoves) {
  // Qwen3-0.6B: 28 layers, hidden 1024, 16/8 heads of 128, MLP 3072. Per layer r (in +
  // out): q 16 (1024 + 2048), k and v 16 (1024 + 1024), o as q, gate/up/down 16 (1024 +
  // 3072) each: 360,448; x 28 = 10,092,544 (aspen bench publish's lora_parameters).
  const ModelConfig config = qwen3_0_6b_shape();
  const ModelCost cost = model_cost(config, shape_of(lora_of_rank(16)));
  EXPECT_EQ(cost.adapter_parameters, 10092544.0);
  EXPECT_GT(cost.parameters / cost.adapter_parameters, 59.0);  // 596,049,920 / 10,092,544
}

ModelCost lora_cost_model(double adapters) {
  ModelCost m;
  m.layers = 28;
  m.hidden = 3584;
  m.parameters = 7.6e9;
  m.matmul_parameters = 7.0e9;
  m.attention_flops_per_pair = 28 * 2.0 * 28 * 256;
  m.kv_elements_per_token = 28 * 2.0 * 4 * 128;
  m.adapter_parameters = adapters;
  m.adapter_matmul_parameters = adapters;
  return m;
}

TEST(LoraCost, TrainFlopsSplitForwardActivationAndWeightGradients) {
  const double n = 7.0e9, a = 28 * 2.0 * 28 * 256, tokens = 1000, pairs = 5e5;
  // Full fine-tuning: forward 2N + activation grads 2N + weight grads 2N = 3 x forward.
  const ModelCost full = lora_cost_model(0);
  EXPECT_DOUBLE_EQ(full.train_flops(tokens, pairs), 3.0 * full.forward_flops(tokens, pairs));
  // LoRA: weight gradients for the adapters alone; the adapters' own forward and
  // activation gradients on top.
  const double na = 4.0e7;
  const ModelCost lora = lora_cost_model(na);
  EXPECT_DOUBLE_EQ(lora.train_flops(tokens, pairs),
                   4.0 * (n + na) * tokens + 3.0 * a * pairs + 2.0 * na * tokens);
  // Attention aside, ~2/3 of full fine-tuning's.
  EXPECT_NEAR(lora.train_flops(1, 0) / full.train_flops(1, 0), 2.0 / 3.0, 0.01);
}

TEST(LoraCost, OptimizerStateAndPublishSeeTheAdaptersOnly) {
  ClusterShape cluster;
  cluster.train_tp = 2;
  cluster.instances = 4;
  const DevicePreset device = device_preset("h100");
  const CostModel full(lora_cost_model(0), device, cluster);
  const double na = 4.0e7;
  const CostModel lora(lora_cost_model(na), device, cluster);
  // State per training device: 16 B/param full; the fp32 frozen base + 16 B/adapter.
  EXPECT_DOUBLE_EQ(full.trainer_state_bytes(), 16.0 * 7.6e9 / 2);
  EXPECT_DOUBLE_EQ(lora.trainer_state_bytes(), (4.0 * 7.6e9 + 16.0 * na) / 2);
  // The published bytes and every term proportional to them scale by na / N_all.
  EXPECT_DOUBLE_EQ(full.published_bytes(), 7.6e9 * 2);
  EXPECT_DOUBLE_EQ(lora.published_bytes(), na * 2);
  EXPECT_NEAR(lora.publish_s() / full.publish_s(), na / 7.6e9, 1e-12);
  EXPECT_NEAR(lora.weight_fetch_s() / full.weight_fetch_s(), na / 7.6e9, 1e-12);
  // AdamW over the adapters only (fixed per-update overhead 0 here).
  EXPECT_NEAR(lora.optimizer_step_s() / full.optimizer_step_s(), na / 7.6e9, 1e-12);
  // The rollout is the base's: KV capacity and decode steps unchanged (disaggregated).
  EXPECT_EQ(lora.kv_capacity_tokens(), full.kv_capacity_tokens());
  EXPECT_DOUBLE_EQ(lora.engine_step_s(8, 1e4, 0, 0), full.engine_step_s(8, 1e4, 0, 0));
}

}  // namespace
}  // namespace aspen::sim
