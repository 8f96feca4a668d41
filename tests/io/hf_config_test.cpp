// HF config.json parsing for Qwen2.5, Qwen3, Qwen3-MoE and DeepSeek-V3 (YaRN rope
// scaling included), round trips, and every rejection.
#include "aspen/io/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace aspen::io {
namespace {

using testing::expect_error;

// As published with Qwen/Qwen2.5-0.5B.
const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// As published with Qwen/Qwen3-0.6B.
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// As published with Qwen/Qwen3-30B-A3B.
const char* kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// deepseek-ai/DeepSeek-V3's config.json without auto_map (its rope_scaling and fp8
// quantization_config are added back in the test that refuses them).
const char* kDeepseekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "aux_loss_alpha": 0.001,
  "bos_token_id": 0,
  "eos_token_id": 1,
  "ep_size": 1,
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "initializer_range": 0.02,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_group": 8,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06,
  "rope_theta": 10000,
  "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid",
  "seq_aux": true,
  "tie_word_embeddings": false,
  "topk_group": 4,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "transformers_version": "4.33.1",
  "use_cache": true,
  "v_head_dim": 128,
  "vocab_size": 129280
})";

std::string with(const char* base, const std::string& key, const std::string& value) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(base);
  if (value.empty()) {
    json.erase(key);
  } else {
    json[key] = nlohmann::ordered_json::parse(value);
  }
  return json.dump();
}

// kQwen3 with `key` set to `value` (JSON text), or removed when value is empty.
std::string qwen3_with(const std::string& key, const std::string& value) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(kQwen3);
  if (value.empty()) {
    json.erase(key);
  } else {
    json[key] = nlohmann::ordered_json::parse(value);
  }
  return json.dump();
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
  EXPECT_TRUE(a.moe == b.moe);
  EXPECT_TRUE(a.mla == b.mla);
  EXPECT_TRUE(a.rope_scaling == b.rope_scaling);
}

TEST(HfConfig, ParsesQwen25) {
  const ModelConfig c = parse_hf_config(kQwen25, "config.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_EQ(c.model_type(), "qwen2");
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_id, 151643);
}

TEST(HfConfig, ParsesQwen3WithExplicitHeadDim) {
  const ModelConfig c = parse_hf_config(kQwen3, "config.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen3);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not 1024 / 16
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rope_theta, 1e6);  // written as an integer
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.eos_token_id, 151645);
}

TEST(HfConfig, Qwen3DefaultsAndVariants) {
  EXPECT_EQ(parse_hf_config(qwen3_with("head_dim", ""), "c").head_dim, 64);
  EXPECT_TRUE(parse_hf_config(qwen3_with("attention_bias", "true"), "c").attention_bias);
  EXPECT_EQ(parse_hf_config(qwen3_with("eos_token_id", "[151645, 151643]"), "c").eos_token_id,
            151645);
  EXPECT_EQ(parse_hf_config(qwen3_with("bos_token_id", "null"), "c").bos_token_id, -1);
  EXPECT_EQ(parse_hf_config(qwen3_with("num_key_value_heads", ""), "c").num_key_value_heads, 16);
  EXPECT_EQ(parse_hf_config(qwen3_with("torch_dtype", ""), "c").torch_dtype, "float32");
  EXPECT_EQ(parse_hf_config(qwen3_with("rope_theta", ""), "c").rope_theta, 10000.0);
  // transformers >= 5 spelling.
  const std::string v5 =
      qwen3_with("rope_parameters", R"({"rope_type": "default", "rope_theta": 5000000})");
  EXPECT_EQ(parse_hf_config(v5, "c").rope_theta, 5e6);
}

TEST(HfConfig, RoundTripsThroughToHfConfigJson) {
  for (const char* text : {kQwen25, kQwen3}) {
    const ModelConfig original = parse_hf_config(text, "config.json");
    const ModelConfig again = parse_hf_config(to_hf_config_json(original), "round trip");
    expect_same(original, again);
  }
  ModelConfig odd;
  odd.family = ModelFamily::kQwen3;
  odd.hidden_size = 64, odd.intermediate_size = 96, odd.num_hidden_layers = 2;
  odd.num_attention_heads = 4, odd.num_key_value_heads = 2, odd.head_dim = 32;
  odd.rope_theta = 12345.678, odd.rms_norm_eps = 1.5e-5, odd.vocab_size = 300;
  odd.attention_bias = true, odd.torch_dtype = "float32";
  expect_same(odd, parse_hf_config(to_hf_config_json(odd), "round trip"));
}

TEST(HfConfig, ParsesQwen3MoeAndDecidesWhichLayersAreSparse) {
  const ModelConfig c = parse_hf_config(kQwen3Moe, "config.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen3Moe);
  EXPECT_TRUE(c.is_moe());
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_EQ(c.model_type(), "qwen3_moe");
  EXPECT_EQ(c.moe.num_experts, 128);
  EXPECT_EQ(c.moe.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe.moe_intermediate_size, 768);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.moe.router_aux_loss_coef, 0.001);
  for (int64_t layer = 0; layer < 48; ++layer) EXPECT_TRUE(c.is_sparse_layer(layer));
  // transformers >= 5 writes the expert count as num_local_experts.
  const std::string v5 = with(with(kQwen3Moe, "num_experts", "").c_str(), "num_local_experts", "64");
  EXPECT_EQ(parse_hf_config(v5, "c").moe.num_experts, 64);
  // transformers' rule: not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  const std::string stepped =
      with(with(kQwen3Moe, "decoder_sparse_step", "2").c_str(), "mlp_only_layers", "[3]");
  const ModelConfig s = parse_hf_config(stepped, "c");
  EXPECT_FALSE(s.is_sparse_layer(0));
  EXPECT_TRUE(s.is_sparse_layer(1));
  EXPECT_FALSE(s.is_sparse_layer(2));
  EXPECT_FALSE(s.is_sparse_layer(3));  // listed dense
  EXPECT_TRUE(s.is_sparse_layer(5));
  EXPECT_FALSE(parse_hf_config(kQwen3, "c").is_sparse_layer(0));  // dense Qwen3
  for (const std::string& text : {std::string(kQwen3Moe), stepped}) {
    const ModelConfig original = parse_hf_config(text, "config.json");
    expect_same(original, parse_hf_config(to_hf_config_json(original), "round trip"));
  }
}

TEST(HfConfig, RejectsInconsistentMoeSettingsNamingTheKey) {
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "num_experts_per_tok", "200"), "config.json"); },
               {"config.json: num_experts_per_tok", "exceeds num_experts 128"});
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "num_experts", "0"), "config.json"); },
               {"config.json: num_experts", "must be positive"});
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "moe_intermediate_size", ""), "config.json"); },
               {"config.json: moe_intermediate_size", "missing"});
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "mlp_only_layers", "[48]"), "config.json"); },
               {"config.json: mlp_only_layers", "layer 48"});
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "mlp_only_layers", "[\"a\"]"), "config.json"); },
               {"config.json: mlp_only_layers", "layer indices"});
  expect_error([&] { parse_hf_config(with(kQwen3Moe, "decoder_sparse_step", "0"), "config.json"); },
               {"config.json: decoder_sparse_step", "must be positive"});
}

TEST(HfConfig, ParsesDeepseekV3AndRoundTripsIt) {
  const ModelConfig c = parse_hf_config(kDeepseekV3, "config.json");
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV3);
  EXPECT_EQ(c.architecture(), "DeepseekV3ForCausalLM");
  EXPECT_TRUE(c.is_moe());
  EXPECT_TRUE(c.is_mla());
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_EQ(c.head_dim, 64);  // the rope width, as transformers sets it
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.mla.qk_head_dim(), 192);
  EXPECT_EQ(c.mla.v_head_dim, 128);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_EQ(c.mla.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.moe.scoring, RouterScoring::kSigmoidGroupLimited);
  EXPECT_EQ(c.moe.num_experts, 256);
  EXPECT_EQ(c.moe.n_group, 8);
  EXPECT_EQ(c.moe.topk_group, 4);
  EXPECT_EQ(c.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.moe.n_shared_experts, 1);
  EXPECT_FALSE(c.is_sparse_layer(2));  // first_k_dense_replace = 3
  EXPECT_TRUE(c.is_sparse_layer(3));
  EXPECT_TRUE(c.is_sparse_layer(60));
  expect_same(c, parse_hf_config(to_hf_config_json(c), "round trip"));
  // transformers 5 writes q_lora_rank null for an uncompressed query, and its own key
  // for the expert count.
  const ModelConfig plain = parse_hf_config(
      with(with(kDeepseekV3, "q_lora_rank", "null").c_str(), "rope_interleave", "false"), "c");
  EXPECT_EQ(plain.mla.q_lora_rank, 0);
  EXPECT_FALSE(plain.mla.rope_interleave);
  expect_same(plain, parse_hf_config(to_hf_config_json(plain), "round trip"));
}

// YaRN as DeepSeek-V3 ships it (old "rope_scaling" key, "type") and as transformers 5
// writes it ("rope_parameters" with rope_theta inside); both round-trip.
TEST(HfConfig, ParsesYarnRopeScalingInBothSpellings) {
  const ModelConfig deepseek = parse_hf_config(
      with(kDeepseekV3, "rope_scaling",
           R"({"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
               "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"})"),
      "config.json");
  EXPECT_TRUE(deepseek.rope_scaling.yarn);
  EXPECT_EQ(deepseek.rope_scaling.factor, 40.0);
  EXPECT_EQ(deepseek.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(deepseek.rope_scaling.cos_sin_scale(), 1.0);  // mscale == mscale_all_dim
  EXPECT_DOUBLE_EQ(yarn_mscale(40.0, 1.0), 0.1 * std::log(40.0) + 1.0);
  expect_same(deepseek, parse_hf_config(to_hf_config_json(deepseek), "round trip"));

  const ModelConfig qwen = parse_hf_config(
      qwen3_with("rope_parameters", R"({"rope_type": "yarn", "rope_theta": 5000000, "factor": 4.0,
                                        "original_max_position_embeddings": 32768})"),
      "config.json");
  EXPECT_TRUE(qwen.rope_scaling.yarn);
  EXPECT_EQ(qwen.rope_theta, 5000000.0);
  EXPECT_DOUBLE_EQ(qwen.rope_scaling.cos_sin_scale(), 0.1 * std::log(4.0) + 1.0);
  expect_same(qwen, parse_hf_config(to_hf_config_json(qwen), "round trip"));
  EXPECT_FALSE(parse_hf_config(kQwen3, "c").rope_scaling.yarn);
}

TEST(HfConfig, RejectsDeepseekSettingsItDoesNotImplementNamingTheKey) {
  expect_error([&] {
    parse_hf_config(with(kDeepseekV3, "quantization_config",
                         R"({"quant_method": "fp8", "weight_block_size": [128, 128]})"),
                    "config.json");
  }, {"config.json: quantization_config", "bfloat16"});
  expect_error([&] {
    parse_hf_config(with(kDeepseekV3, "rope_scaling", R"({"type": "yarn", "factor": 40})"),
                    "config.json");
  }, {"config.json: rope_scaling", "original_max_position_embeddings"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "topk_method", "\"greedy\""), "config.json"); },
               {"config.json: topk_method", "noaux_tc"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "scoring_func", "\"softmax\""), "config.json"); },
               {"config.json: scoring_func", "sigmoid"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "n_group", "7"), "config.json"); },
               {"config.json: n_group", "equal groups"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "topk_group", "9"), "config.json"); },
               {"config.json: topk_group", "exceeds n_group"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "kv_lora_rank", ""), "config.json"); },
               {"config.json: kv_lora_rank", "missing"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "q_lora_rank", "0"), "config.json"); },
               {"config.json: q_lora_rank", "positive"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "moe_layer_freq", "2"), "config.json"); },
               {"config.json: moe_layer_freq"});
  expect_error([&] { parse_hf_config(with(kDeepseekV3, "first_k_dense_replace", "62"), "config.json"); },
               {"config.json: first_k_dense_replace"});
}

TEST(HfConfig, LoadsFromFileAndNamesThePathInErrors) {
  testing::TempDir dir;
  const std::string path = dir.file("config.json");
  testing::write_bytes(path, kQwen3);
  EXPECT_EQ(load_hf_config(path).head_dim, 128);
  testing::write_bytes(path, qwen3_with("hidden_act", "\"gelu\""));
  expect_error([&] { load_hf_config(path); }, {path + ": hidden_act", "gelu"});
  expect_error([&] { load_hf_config(dir.file("absent.json")); }, {"absent.json"});
}

TEST(HfConfig, RejectsUnsupportedArchitectures) {
  expect_error([&] { parse_hf_config(qwen3_with("model_type", "\"llama\""), "config.json"); },
               {"config.json: model_type", "unsupported model_type \"llama\""});
  expect_error([&] { parse_hf_config(qwen3_with("model_type", "\"deepseek_v2\""), "config.json"); },
               {"config.json: model_type", "deepseek_v3"});
  // A Qwen3 architecture under DeepSeek-V3's model_type.
  expect_error([&] { parse_hf_config(qwen3_with("model_type", "\"deepseek_v3\""), "config.json"); },
               {"config.json: architectures", "DeepseekV3ForCausalLM"});
  // A dense architecture under the MoE model_type.
  expect_error([&] { parse_hf_config(qwen3_with("model_type", "\"qwen3_moe\""), "config.json"); },
               {"config.json: architectures", "Qwen3MoeForCausalLM"});
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("architectures", R"(["Qwen2ForCausalLM"])"), "config.json");
      },
      {"config.json: architectures", "Qwen3ForCausalLM"});
  expect_error([&] { parse_hf_config(qwen3_with("architectures", "\"Qwen3\""), "config.json"); },
               {"config.json: architectures", "must be a list"});
}

TEST(HfConfig, RejectsSettingsItWouldComputeWrongly) {
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("rope_scaling", R"({"rope_type": "linear", "factor": 4.0})"),
                        "c.json");
      },
      {"c.json: rope_scaling", "\"factor\" is not supported with rope type linear"});
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("rope_parameters", R"({"rope_type": "longrope"})"), "c.json");
      },
      {"c.json: rope_parameters", "rope type \"longrope\" is not supported"});
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("rope_parameters", R"({"rope_type": "yarn", "factor": 4})"),
                        "c.json");
      },
      {"c.json: rope_parameters", "original_max_position_embeddings"});
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("rope_scaling", R"({"type": "yarn", "factor": -2,
                                                       "original_max_position_embeddings": 64})"),
                        "c.json");
      },
      {"c.json: rope_scaling", "factor must be positive"});
  expect_error([&] { parse_hf_config(qwen3_with("use_sliding_window", "true"), "c.json"); },
               {"c.json: use_sliding_window"});
  expect_error(
      [&] {
        parse_hf_config(qwen3_with("layer_types", R"(["full_attention", "sliding_attention"])"),
                        "c.json");
      },
      {"c.json: layer_types"});
  expect_error([&] { parse_hf_config(qwen3_with("hidden_act", "\"gelu\""), "c.json"); },
               {"c.json: hidden_act"});
}

TEST(HfConfig, RejectsMissingAndIllTypedKeys) {
  for (const char* key : {"model_type", "vocab_size", "hidden_size", "intermediate_size",
                          "num_hidden_layers", "num_attention_heads"}) {
    expect_error([&] { parse_hf_config(qwen3_with(key, ""), "c.json"); },
                 {std::string("c.json: ") + key, "missing required key"});
  }
  expect_error([&] { parse_hf_config(qwen3_with("hidden_size", "\"1024\""), "c.json"); },
               {"c.json: hidden_size", "must be an integer"});
  expect_error([&] { parse_hf_config(qwen3_with("hidden_size", "1024.5"), "c.json"); },
               {"c.json: hidden_size", "must be an integer"});
  expect_error([&] { parse_hf_config(qwen3_with("rope_theta", "\"1e6\""), "c.json"); },
               {"c.json: rope_theta", "must be a number"});
  expect_error([&] { parse_hf_config(qwen3_with("tie_word_embeddings", "1"), "c.json"); },
               {"c.json: tie_word_embeddings", "true or false"});
  expect_error([&] { parse_hf_config(qwen3_with("eos_token_id", "\"</s>\""), "c.json"); },
               {"c.json: eos_token_id"});
  expect_error([&] { parse_hf_config(qwen3_with("eos_token_id", "[]"), "c.json"); },
               {"c.json: eos_token_id"});
  expect_error([&] { parse_hf_config(qwen3_with("torch_dtype", "\"float8\""), "c.json"); },
               {"c.json: torch_dtype"});
  expect_error([&] { parse_hf_config("[1]", "c.json"); }, {"c.json", "JSON object"});
  expect_error([&] { parse_hf_config("{", "c.json"); }, {"c.json", "invalid JSON"});
  expect_error([&] { parse_hf_config(R"({"model_type":"qwen3","model_type":"qwen2"})", "c.json"); },
               {"c.json", "duplicate key \"model_type\""});
}

// Found by fuzz_hf_config: bos_token_id -7516143 parsed as is, was written back as
// null, and read again as -1 - a config that did not survive its own round trip.
TEST(HfConfig, ANegativeTokenIdOtherThanMinusOneIsAnError) {
  try {
    parse_hf_config(qwen3_with("bos_token_id", "-7516143"), "config.json");
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.input(), "config.json: bos_token_id");
  }
  EXPECT_THROW(parse_hf_config(qwen3_with("eos_token_id", "[151645, -2]"), "config.json"), Error);
  const ModelConfig none = parse_hf_config(qwen3_with("bos_token_id", "-1"), "config.json");
  EXPECT_EQ(none.bos_token_id, -1);
  expect_same(none, parse_hf_config(to_hf_config_json(none), "written"));
}

TEST(HfConfig, ValidateRejectsInconsistentShapes) {
  expect_error([&] { parse_hf_config(qwen3_with("num_key_value_heads", "5"), "c.json"); },
               {"c.json: num_key_value_heads", "not a multiple"});
  expect_error([&] { parse_hf_config(qwen3_with("hidden_size", "0"), "c.json"); },
               {"c.json: hidden_size", "positive"});
  expect_error([&] { parse_hf_config(qwen3_with("head_dim", "-2"), "c.json"); },
               {"c.json: head_dim"});
  ModelConfig qwen2 = parse_hf_config(kQwen25, "c");
  qwen2.attention_bias = false;
  expect_error([&] { qwen2.validate("mine"); }, {"mine: attention_bias"});
  qwen2.attention_bias = true;
  qwen2.head_dim = 128;
  expect_error([&] { qwen2.validate("mine"); }, {"mine: head_dim"});
}

}  // namespace
}  // namespace aspen::io
