// Weight loading/saving and initialisation. That a loaded model computes what HF
// transformers computes is transformers_parity_test.cpp's part (and, for checkpoints
// with the full Qwen vocabulary, tests/cli/logprobs_parity_test.cpp's).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

namespace fs = std::filesystem;

std::map<std::string, torch::Tensor> state_of(const QwenForCausalLM& model) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : model->hf_state()) state[item.first] = item.second.detach().clone();
  return state;
}

std::string load_error(QwenForCausalLM& model, const std::map<std::string, torch::Tensor>& state) {
  try {
    model->load_state(state, "ckpt");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(QwenModelNames, ParametersAreExactlyTheHfKeys) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen3, /*tied=*/false, 12);
  c.num_hidden_layers = 1;
  std::vector<std::string> names;
  for (const auto& item : QwenForCausalLM(c)->hf_state()) names.push_back(item.first);
  const std::vector<std::string> want = {"model.embed_tokens.weight",
                                         "model.layers.0.input_layernorm.weight",
                                         "model.layers.0.self_attn.q_proj.weight",
                                         "model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.v_proj.weight",
                                         "model.layers.0.self_attn.o_proj.weight",
                                         "model.layers.0.self_attn.q_norm.weight",
                                         "model.layers.0.self_attn.k_norm.weight",
                                         "model.layers.0.post_attention_layernorm.weight",
                                         "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight",
                                         "model.norm.weight",
                                         "lm_head.weight"};
  EXPECT_EQ(names, want);

  ModelConfig q2 = testing::tiny_config(ModelFamily::kQwen2, /*tied=*/true, 8);
  auto state = state_of(QwenForCausalLM(q2));
  EXPECT_EQ(state.count("lm_head.weight"), 0u);
  EXPECT_EQ(state.count("model.layers.1.self_attn.q_norm.weight"), 0u);
  EXPECT_EQ(state.at("model.layers.1.self_attn.k_proj.bias").sizes(), (std::vector<int64_t>{16}));
  EXPECT_EQ(state.count("model.layers.1.self_attn.o_proj.bias"), 0u);
}

TEST(QwenModelLoad, ErrorsNameTheKey) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen3, false, 8);
  QwenForCausalLM model = make_random_model(c, 1);
  auto good = state_of(model);

  auto missing = good;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_NE(load_error(model, missing).find("missing weight \"model.layers.1.mlp.up_proj.weight\""),
            std::string::npos);

  auto extra = good;
  extra["model.layers.2.mlp.up_proj.weight"] = torch::zeros({48, 32});
  EXPECT_NE(
      load_error(model, extra).find("unexpected weight \"model.layers.2.mlp.up_proj.weight\""),
      std::string::npos);

  auto shaped = good;
  shaped["model.norm.weight"] = torch::ones({31});
  const std::string message = load_error(model, shaped);
  EXPECT_NE(message.find("\"model.norm.weight\" has shape [31]"), std::string::npos) << message;
  EXPECT_EQ(message.rfind("ckpt", 0), 0u) << message;  // names the source

  // Nothing was copied by the failed loads.
  EXPECT_TRUE(torch::equal(model->model->norm->weight, good.at("model.norm.weight")));
}

TEST(QwenModelLoad, CastsDtypeAndToleratesTiedHeadCopy) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen2, /*tied=*/true, 8);
  auto state = state_of(make_random_model(c, 2));
  state["lm_head.weight"] = state.at("model.embed_tokens.weight");
  state["model.rotary_emb.inv_freq"] = torch::ones({4});
  for (auto& entry : state) entry.second = entry.second.to(torch::kBFloat16);
  QwenForCausalLM model(c);
  model->load_state(state, "ckpt");
  EXPECT_EQ(model->lm_head_weight().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(model->lm_head_weight(),
                           state.at("model.embed_tokens.weight").to(torch::kFloat)));
}

TEST(QwenModelInit, FollowsHfInitAndIsDeterministicPerSeed) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen2, false, 8);
  c.vocab_size = 2000;
  auto a = state_of(make_random_model(c, 42));
  auto b = state_of(make_random_model(c, 42));
  auto other = state_of(make_random_model(c, 43));
  for (const auto& entry : a)
    EXPECT_TRUE(torch::equal(entry.second, b.at(entry.first))) << entry.first;
  EXPECT_FALSE(torch::equal(a.at("lm_head.weight"), other.at("lm_head.weight")));
  EXPECT_TRUE(torch::all(a.at("model.norm.weight") == 1).item<bool>());
  EXPECT_TRUE(torch::all(a.at("model.layers.0.self_attn.q_proj.bias") == 0).item<bool>());
  EXPECT_NEAR(a.at("model.embed_tokens.weight").std().item<float>(), 0.02, 0.001);
  EXPECT_NEAR(a.at("model.embed_tokens.weight").mean().item<float>(), 0.0, 0.001);
  auto bf16 = make_random_model(c, 42, torch::kBFloat16);
  EXPECT_EQ(bf16->lm_head_weight().scalar_type(), torch::kBFloat16);
}

TEST(QwenPretrained, SaveThenLoadRoundTripsSingleAndSharded) {
  for (int64_t shard_bytes : {int64_t{0}, int64_t{20000}}) {
    ModelConfig c = testing::tiny_config(ModelFamily::kQwen3, false, 12);
    QwenForCausalLM model = make_random_model(c, 7);
    const std::string dir =
        ::testing::TempDir() + "/aspen_model_roundtrip_" + std::to_string(shard_bytes);
    fs::remove_all(dir);
    save_pretrained_model(dir, model, shard_bytes);
    EXPECT_TRUE(fs::exists(dir + "/config.json"));
    EXPECT_EQ(fs::exists(dir + "/model.safetensors"), shard_bytes == 0);
    QwenForCausalLM loaded = load_pretrained_model(dir);
    EXPECT_EQ(loaded->config.head_dim, 12);
    auto want = state_of(model);
    auto got = state_of(loaded);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& entry : want) EXPECT_TRUE(torch::equal(got.at(entry.first), entry.second));
    QwenForCausalLM as_bf16 = load_pretrained_model(dir, torch::kBFloat16);
    EXPECT_EQ(as_bf16->lm_head_weight().scalar_type(), torch::kBFloat16);
    fs::remove_all(dir);
  }
}

TEST(QwenPretrained, AConfigThatDoesNotDescribeTheWeightsIsRefusedBeforeAllocating) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen3, false, 12);
  const std::string dir = ::testing::TempDir() + "/aspen_model_lying_config";
  fs::remove_all(dir);
  save_pretrained_model(dir, make_random_model(c, 7));
  const std::string good = read_file(dir + "/config.json");
  // vocab_size 10^12 would be a 256 TB embedding if the model were built first.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"vocab_size", 1000000000000LL},
                                                           {"num_hidden_layers", 100000},
                                                           {"intermediate_size", 1 << 30}}) {
    nlohmann::json config = nlohmann::json::parse(good);
    config[key] = value;
    write_file_atomic(dir + "/config.json", config.dump());
    try {
      load_pretrained_model(dir);
      FAIL() << key << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), dir + "/config.json") << e.what();
    }
  }
  fs::remove_all(dir);
}

// Keys that decide which tensors exist (not only their sizes): each change below makes
// the model expect a tensor the checkpoint lacks, or lack one it holds (or, for eos,
// name a row the embedding lacks). Refused from the files alone, as `aspen info`
// refuses them too (it shares the check).
TEST(QwenPretrained, ConfigKeysThatAddOrRemoveTensorsAreRefusedNamingThem) {
  struct Case {
    ModelConfig model;
    std::string key;
    nlohmann::json value;
    std::string named;  // what the error must mention
  };
  const std::vector<Case> cases = {
      {testing::tiny_config(ModelFamily::kQwen3, /*tied=*/true, 8), "tie_word_embeddings", false,
       "lm_head.weight"},
      {testing::tiny_config(ModelFamily::kQwen3, false, 8), "attention_bias", true,
       "q_proj.bias"},
      {testing::tiny_config(ModelFamily::kQwen3, false, 8), "model_type", "qwen2", "qwen2"},
      {testing::tiny_config(ModelFamily::kQwen3, false, 8), "head_dim", 16, "head_dim"},
      {testing::tiny_config(ModelFamily::kQwen3, false, 8), "eos_token_id", 50, "eos_token_id"},
      {testing::tiny_moe_config(), "mlp_only_layers", nlohmann::json::array(), "mlp_only_layers"},
      {testing::tiny_moe_config(), "decoder_sparse_step", 2, "decoder_sparse_step"},
      {testing::tiny_moe_config(), "moe_intermediate_size", 32, "moe_intermediate_size"},
      {testing::tiny_deepseek_config(), "n_shared_experts", 0, "n_shared_experts"},
      {testing::tiny_deepseek_config(), "first_k_dense_replace", 0, "first_k_dense_replace"},
  };
  const std::string dir = ::testing::TempDir() + "/aspen_model_keys_without_tensors";
  for (const Case& c : cases) {
    fs::remove_all(dir);
    save_pretrained_model(dir, make_random_model(c.model, 3));
    ASSERT_NO_THROW(load_pretrained_model(dir)) << c.key;
    nlohmann::json config = nlohmann::json::parse(read_file(dir + "/config.json"));
    config[c.key] = c.value;
    if (c.key == "model_type") config["architectures"] = {"Qwen2ForCausalLM"};
    write_file_atomic(dir + "/config.json", config.dump());
    try {
      load_pretrained_model(dir);
      ADD_FAILURE() << c.key << " = " << c.value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), dir + "/config.json") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

// DeepSeek-V3 checkpoints carry their multi-token-prediction module as decoder layer
// num_hidden_layers (+ its own head parts): skipped on load, the rest loads exactly -
// and a checkpoint that does not declare the module still has its layer count checked.
// The router bias loads but never trains.
TEST(QwenPretrained, DeepseekMtpLayersAreSkippedOnLoadAndTheRouterBiasIsFrozen) {
  ModelConfig c = testing::tiny_deepseek_config();
  c.mla.num_nextn_predict_layers = 1;
  QwenForCausalLM model = make_random_model(c, 9);
  const std::string dir = ::testing::TempDir() + "/aspen_model_deepseek_mtp";
  fs::remove_all(dir);
  save_pretrained_model(dir, model);
  std::vector<std::pair<std::string, torch::Tensor>> weights = model->hf_state();
  const std::string mtp = "model.layers." + std::to_string(c.num_hidden_layers) + ".";
  weights.emplace_back(mtp + "eh_proj.weight", torch::randn({c.hidden_size, 2 * c.hidden_size}));
  weights.emplace_back(mtp + "enorm.weight", torch::ones({c.hidden_size}));
  weights.emplace_back(mtp + "self_attn.kv_b_proj.weight", torch::randn({8, 8}));
  save_model_weights(dir, weights, 0);
  QwenForCausalLM loaded = load_pretrained_model(dir);
  const auto want = state_of(model);
  const auto got = state_of(loaded);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& entry : want) EXPECT_TRUE(torch::equal(got.at(entry.first), entry.second));
  const std::string bias = "model.layers.1.mlp.gate.e_score_correction_bias";
  ASSERT_EQ(got.count(bias), 1u);
  EXPECT_TRUE(is_frozen_parameter(bias));
  EXPECT_FALSE(loaded->named_parameters()[bias].requires_grad());

  nlohmann::json config = nlohmann::json::parse(read_file(dir + "/config.json"));
  config["num_nextn_predict_layers"] = 0;
  write_file_atomic(dir + "/config.json", config.dump());
  try {
    load_pretrained_model(dir);
    FAIL() << "an undeclared extra layer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(QwenPretrained, MissingDirectoryIsAnError) {
  EXPECT_THROW(load_pretrained_model("/nonexistent/aspen_model_dir"), Error);
}

// Throughput report, not a timed assertion: run with --gtest_also_run_disabled_tests.
TEST(QwenModelBench, DISABLED_ForwardTokensPerSecondOneThread) {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.vocab_size = 8192;
  c.hidden_size = 256;
  c.intermediate_size = 768;
  c.num_hidden_layers = 10;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.tie_word_embeddings = true;
  QwenForCausalLM model = make_random_model(c, 0);
  int64_t params = 0;
  for (const auto& item : model->hf_state()) params += item.second.numel();
  torch::set_num_threads(1);
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> offsets = {0, 256, 512, 768, 1024};
  torch::Tensor ids = torch::randint(0, c.vocab_size, {offsets.back()}, torch::kLong);
  torch::Tensor cu = torch::tensor(offsets, torch::kLong);
  model(ids, cu);  // warm-up
  const int reps = 3;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) model(ids, cu);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Qwen3 %.1fM params, 4 x 256 tokens, 1 thread: %.0f forward tokens/s\n", params / 1e6,
              reps * offsets.back() / seconds);
}

}  // namespace
}  // namespace aspen::model
