// The analytic parameter counts of sim/model_cost.h against real models built from
// the same configs: every weight, and the matmul parameters a token passes (experts
// k / E, the head once, the embedding lookup not).
#include <gtest/gtest.h>

#include <string>

#include "aspen/model/weights_init.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/sim/model_cost.h"

namespace aspen::sim {
namespace {

struct Counted {
  double all = 0;
  double matmul = 0;
};

Counted count_built(const ModelConfig& config) {
  QwenForCausalLM model = make_random_model(config, 7);
  Counted c;
  const MoeConfig& moe = config.moe;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const auto numel = static_cast<double>(item.value().numel());
    c.all += numel;
    if (item.value().dim() != 2 || name.find("embed_tokens") != std::string::npos) continue;
    const bool expert = name.find(".mlp.experts.") != std::string::npos;
    c.matmul += expert ? numel * static_cast<double>(moe.num_experts_per_tok) /
                             static_cast<double>(moe.num_experts)
                       : numel;
  }
  if (config.tie_word_embeddings) c.matmul += static_cast<double>(model->lm_head_weight().numel());
  return c;
}

ModelConfig builtin(BuiltinModelKind kind) {
  ModelSection section;
  section.kind = kind;
  return builtin_model_config(section, 300);
}

void expect_counts_match(const ModelConfig& config) {
  const ModelCost cost = model_cost(config);
  const Counted built = count_built(config);
  EXPECT_EQ(cost.parameters, built.all) << config.model_type();
  EXPECT_DOUBLE_EQ(cost.matmul_parameters, built.matmul) << config.model_type();
}

TEST(ModelCost, DenseQwen3CountsEqualTheBuiltModel) { expect_counts_match(builtin(BuiltinModelKind::kQwen3)); }

TEST(ModelCost, Qwen3MoeCountsEqualTheBuiltModel) {
  expect_counts_match(builtin(BuiltinModelKind::kQwen3Moe));
}

TEST(ModelCost, DeepseekV3CountsEqualTheBuiltModel) {
  expect_counts_match(builtin(BuiltinModelKind::kDeepseekV3));
}

TEST(ModelCost, UntiedQwen2WithBiasCountsEqualTheBuiltModel) {
  ModelConfig config = builtin(BuiltinModelKind::kQwen3);
  config.family = ModelFamily::kQwen2;
  config.attention_bias = true;
  config.tie_word_embeddings = false;
  expect_counts_match(config);
}

TEST(ModelCost, KvCacheAndAttentionTermsFollowTheAttentionKind) {
  const ModelConfig dense = builtin(BuiltinModelKind::kQwen3);
  const ModelCost d = model_cost(dense);
  // 2 x kv_heads x head_dim per layer; QK^T and AV: 2 x heads x (d + d) per pair.
  EXPECT_EQ(d.kv_elements_per_token, 4.0 * 2 * 2 * 32);
  EXPECT_EQ(d.attention_flops_per_pair, 4.0 * 2 * 4 * (32 + 32));
  const ModelConfig mla = builtin(BuiltinModelKind::kDeepseekV3);
  const ModelCost m = model_cost(mla);
  EXPECT_EQ(m.kv_elements_per_token,
            4.0 * static_cast<double>(mla.mla.kv_lora_rank + mla.mla.qk_rope_head_dim));
}

TEST(ModelCost, CausalPairsCountEveryQueryKeyPairOnce) {
  EXPECT_EQ(causal_pairs(1), 1.0);
  EXPECT_EQ(causal_pairs(4), 10.0);       // 1 + 2 + 3 + 4
  EXPECT_EQ(causal_pairs(2, 5), 13.0);    // 6 + 7
}

}  // namespace
}  // namespace aspen::sim
