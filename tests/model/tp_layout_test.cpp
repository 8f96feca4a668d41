// The Qwen tensor-parallel layout (model/tp_layout.h): every parameter of every
// tiny architecture has a spec that splits it evenly, and validate_tp_size names
// the config field a TP size cannot split. Multi-rank numerics: tests/parallel.
#include "aspen/model/tp_layout.h"

#include <gtest/gtest.h>

#include <string>

#include "aspen/model/qwen_model.h"
#include "aspen/util/error.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

using testing::tiny_configs;

std::string tp_size_error(const ModelConfig& config, int size) {
  try {
    validate_tp_size(config, size);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(TpLayout, EveryParameterOfEveryTinyConfigHasASpecThatSplitsEvenly) {
  for (const auto& named : tiny_configs()) {
    ModelConfig config = named.config;
    config.vocab_size = 64;  // divisible by every TP size below
    QwenForCausalLM model(config);
    for (const auto& [name, param] : model->hf_state()) {
      const ShardSpec spec = qwen_shard_spec(name, config);
      for (int size : {1, 2, 4}) {
        // tiny configs: 4 heads, 2 kv heads (replicated at 4), intermediate 48
        ASSERT_NO_THROW(validate_tp_size(config, size)) << named.name << " size " << size;
        int64_t rows = 0;  // elements along the split dim, summed over distinct shards
        for (int rank = 0; rank < size; ++rank) {
          const torch::Tensor shard = take_shard(param, spec, rank, size, name);
          EXPECT_EQ(full_shape(spec, shard.sizes(), size, name), param.sizes().vec())
              << named.name << " " << name << " size " << size;
          rows += spec.replicated() ? 0 : shard.size(spec.dim);
        }
        if (!spec.replicated() && !has_replicas(spec, size)) {
          EXPECT_EQ(rows, param.size(spec.dim)) << named.name << " " << name;
        }
      }
    }
  }
}

TEST(TpLayout, ParametersFollowMegatronsSplit) {
  const ModelConfig q3 = tiny_configs()[2].config;  // Qwen3, untied, head_dim 12
  ASSERT_TRUE(q3.has_qk_norm());
  auto spec = [&](const std::string& name) { return qwen_shard_spec(name, q3); };
  const int64_t heads = q3.num_attention_heads;
  const int64_t kv = q3.num_key_value_heads;
  EXPECT_EQ(spec("model.embed_tokens.weight"), (ShardSpec{0, q3.vocab_size}));
  EXPECT_EQ(spec("lm_head.weight"), (ShardSpec{0, q3.vocab_size}));
  EXPECT_EQ(spec("model.layers.1.self_attn.q_proj.weight"), (ShardSpec{0, heads}));
  EXPECT_EQ(spec("model.layers.1.self_attn.k_proj.weight"), (ShardSpec{0, kv}));
  EXPECT_EQ(spec("model.layers.1.self_attn.v_proj.bias"), (ShardSpec{0, kv}));
  EXPECT_EQ(spec("model.layers.1.self_attn.o_proj.weight"), (ShardSpec{1, heads}));
  EXPECT_EQ(spec("model.layers.0.mlp.up_proj.weight"), (ShardSpec{0, q3.intermediate_size}));
  EXPECT_EQ(spec("model.layers.0.mlp.down_proj.weight"), (ShardSpec{1, q3.intermediate_size}));
  EXPECT_TRUE(spec("model.layers.0.self_attn.q_norm.weight").replicated());
  EXPECT_TRUE(spec("model.layers.0.input_layernorm.weight").replicated());
  EXPECT_TRUE(spec("model.norm.weight").replicated());
  EXPECT_THROW(spec("model.layers.0.mlp.experts.0.weight"), Error);
}

TEST(TpLayout, MoeExpertsSplitLikeTheDenseMlpAndTheRouterIsReplicated) {
  const ModelConfig moe = testing::tiny_moe_config();
  const int64_t width = moe.moe.moe_intermediate_size;
  auto spec = [&](const std::string& name) { return qwen_shard_spec(name, moe); };
  EXPECT_EQ(spec("model.layers.0.mlp.experts.5.gate_proj.weight"), (ShardSpec{0, width}));
  EXPECT_EQ(spec("model.layers.2.mlp.experts.0.up_proj.weight"), (ShardSpec{0, width}));
  EXPECT_EQ(spec("model.layers.0.mlp.experts.12.down_proj.weight"), (ShardSpec{1, width}));
  EXPECT_TRUE(spec("model.layers.0.mlp.gate.weight").replicated());
  // The dense layer among them keeps the dense layout.
  EXPECT_EQ(spec("model.layers.1.mlp.gate_proj.weight"), (ShardSpec{0, moe.intermediate_size}));
  EXPECT_THROW(spec("model.layers.0.mlp.experts.x.gate_proj.weight"), Error);
  ModelConfig odd = moe;
  odd.moe.moe_intermediate_size = 15;
  EXPECT_NE(tp_size_error(odd, 2).find("moe_intermediate_size"), std::string::npos);
}

TEST(TpLayout, ValidateTpSizeNamesTheFieldItCannotSplit) {
  ModelConfig c = tiny_configs()[0].config;  // 4 heads, 2 kv heads, intermediate 48, vocab 50
  EXPECT_NE(tp_size_error(c, 3).find("num_attention_heads"), std::string::npos);
  EXPECT_NE(tp_size_error(c, 0).find("must be at least 1"), std::string::npos);

  ModelConfig kv = c;
  kv.num_attention_heads = 6;
  kv.num_key_value_heads = 3;  // 2 ranks: neither divides the other
  EXPECT_NE(tp_size_error(kv, 2).find("num_key_value_heads"), std::string::npos);

  ModelConfig inter = c;
  inter.intermediate_size = 50;
  inter.vocab_size = 64;
  EXPECT_NE(tp_size_error(inter, 4).find("intermediate_size"), std::string::npos);

  ModelConfig vocab = c;  // vocab 50 over 4 ranks
  EXPECT_NE(tp_size_error(vocab, 4).find("vocab_size"), std::string::npos);
  EXPECT_EQ(tp_size_error(vocab, 2), "no error");
}

TEST(TpLayout, ModelRefusesATpSizeItsConfigCannotSplit) {
  TensorParallel tp;
  tp.size = 3;  // no group needed: the size check comes first
  try {
    QwenForCausalLM model(tiny_configs()[0].config, tp);
    FAIL() << "constructed a model at TP size 3 with 4 heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
}

TEST(TpLayout, ModelRefusesATpSizeWithoutAProcessGroup) {
  TensorParallel tp;
  tp.size = 2;
  try {
    QwenForCausalLM model(tiny_configs()[0].config, tp);
    FAIL() << "constructed a TP model without a process group";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a process group"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::model
