// io/peft_adapter: PEFT's adapter directory written and read back, the file layout PEFT
// expects, and every refusal of what Aspen cannot apply. PEFT itself checks the format
// in peft_parity_test.cpp.
#include "aspen/io/peft_adapter.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "aspen/io/safetensors.h"
#include "io_test_util.h"
#include "peft_adapter_test_util.h"

namespace aspen::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_error;
using testing::lora_config;
using testing::random_adapter;
using testing::kTinyQwen3;

LoraAdapter sample_adapter() {
  LoraAdapterConfig config = lora_config(4, 16.0, {"down_proj", "q_proj", "v_proj"});
  config.dropout = 0.05;
  config.base_model = "Qwen/Qwen3-0.6B";
  return random_adapter(kTinyQwen3, config, 7);
}

void expect_same_adapter(const LoraAdapter& actual, const LoraAdapter& expected) {
  EXPECT_EQ(actual.config, expected.config);
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const auto& [name, tensor] : expected.tensors) {
    ASSERT_EQ(actual.tensors.count(name), 1u) << name;
    const torch::Tensor& read = actual.tensors.at(name);
    EXPECT_EQ(read.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(read, tensor)) << name;
  }
}

json read_config_json(const testing::TempDir& dir) {
  return json::parse(testing::read_bytes(dir.file(kPeftConfigFile)));
}

// A valid adapter written to `dir`, then its config edited by `edit`.
void write_with_config(const testing::TempDir& dir, const std::function<void(json&)>& edit) {
  write_peft_adapter(dir.path(), sample_adapter());
  json config = read_config_json(dir);
  edit(config);
  testing::write_bytes(dir.file(kPeftConfigFile), config.dump(2));
}

// A valid adapter's config with these raw tensors (names as in the file).
void write_with_tensors(const testing::TempDir& dir,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  write_peft_adapter(dir.path(), sample_adapter());
  write_safetensors(dir.file(kPeftWeightsFile), tensors, {{"format", "pt"}});
}

const std::string kPrefix = "base_model.model.";
const std::string kQ0 = "model.layers.0.self_attn.q_proj";

TEST(PeftAdapter, ReadsBackExactlyWhatItWrote) {
  testing::TempDir dir;
  const LoraAdapter adapter = sample_adapter();
  write_peft_adapter(dir.path(), adapter);
  expect_same_adapter(read_peft_adapter(dir.path()), adapter);
}

TEST(PeftAdapter, KeepsTheTensorsDtypeAndAFractionalAlpha) {
  testing::TempDir dir;
  LoraAdapterConfig config = lora_config(2, 3.5, {"gate_proj"});
  config.use_rslora = true;
  const LoraAdapter adapter = random_adapter(kTinyQwen3, config, 3, torch::kBFloat16);
  write_peft_adapter(dir.path(), adapter);
  expect_same_adapter(read_peft_adapter(dir.path()), adapter);
  EXPECT_EQ(read_config_json(dir)["lora_alpha"], 3.5);
}

// PEFT writes its set of target modules in the set's order, which varies from run to run.
TEST(PeftAdapter, ReadsTargetModulesSorted) {
  testing::TempDir dir;
  write_with_config(dir, [](json& c) { c["target_modules"] = {"v_proj", "down_proj", "q_proj"}; });
  EXPECT_EQ(read_peft_adapter(dir.path()).config.target_modules,
            (std::vector<std::string>{"down_proj", "q_proj", "v_proj"}));
}

TEST(PeftAdapter, CreatesTheDirectoryWithItsParents) {
  testing::TempDir dir;
  const fs::path nested = fs::path(dir.path()) / "final" / "adapter";
  write_peft_adapter(nested, sample_adapter());
  EXPECT_TRUE(fs::exists(nested / kPeftConfigFile));
  EXPECT_TRUE(fs::exists(nested / kPeftWeightsFile));
}

TEST(PeftAdapter, WritesPeftsKeysMetadataAndConfigFields) {
  testing::TempDir dir;
  const LoraAdapter adapter = sample_adapter();
  write_peft_adapter(dir.path(), adapter);

  const SafetensorsReader reader(dir.file(kPeftWeightsFile));
  EXPECT_EQ(reader.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(reader.names().size(), adapter.tensors.size());
  for (const auto& [name, tensor] : adapter.tensors) {
    EXPECT_TRUE(reader.contains(kPrefix + name)) << name;
  }
  EXPECT_TRUE(reader.contains(kPrefix + kQ0 + ".lora_A.weight"));

  const json config = read_config_json(dir);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_TRUE(config["lora_alpha"].is_number_integer());  // 16, as PEFT users write it
  EXPECT_EQ(config["lora_alpha"], 16);
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["target_modules"], json({"down_proj", "q_proj", "v_proj"}));
  EXPECT_EQ(config["base_model_name_or_path"], "Qwen/Qwen3-0.6B");
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["use_rslora"], false);
  EXPECT_EQ(config["use_dora"], false);
  EXPECT_EQ(config["init_lora_weights"], true);
  EXPECT_EQ(config["inference_mode"], true);
  EXPECT_TRUE(config["modules_to_save"].is_null());
  EXPECT_EQ(config["rank_pattern"], json::object());
  EXPECT_EQ(config["alpha_pattern"], json::object());
}

TEST(PeftAdapter, WritesAnEmptyBaseModelAsNull) {
  testing::TempDir dir;
  LoraAdapter adapter = sample_adapter();
  adapter.config.base_model.clear();
  write_peft_adapter(dir.path(), adapter);
  EXPECT_TRUE(read_config_json(dir)["base_model_name_or_path"].is_null());
  EXPECT_EQ(read_peft_adapter(dir.path()).config.base_model, "");
}

TEST(PeftAdapter, ScalingIsAlphaOverRankOrOverItsSquareRootUnderRslora) {
  LoraAdapterConfig config = lora_config(16, 32.0, {"q_proj"});
  EXPECT_DOUBLE_EQ(config.scaling(), 2.0);
  config.use_rslora = true;
  EXPECT_DOUBLE_EQ(config.scaling(), 8.0);
}

TEST(PeftAdapter, ListsTheAdaptedModulesOnce) {
  const LoraAdapter adapter = random_adapter(kTinyQwen3, lora_config(2, 2.0, {"o_proj", "up_proj"}), 1);
  EXPECT_EQ(adapter.adapted_modules(),
            (std::vector<std::string>{"model.layers.0.mlp.up_proj", "model.layers.0.self_attn.o_proj",
                                      "model.layers.1.mlp.up_proj",
                                      "model.layers.1.self_attn.o_proj"}));
}

TEST(PeftAdapter, ARegexTargetBecomesTheLeafNamesOfTheAdaptedModules) {
  testing::TempDir dir;
  write_with_config(dir, [](json& c) { c["target_modules"] = R"(.*\.(q_proj|down_proj))"; });
  // The regex is not evaluated: the file says what PEFT adapted.
  EXPECT_EQ(read_peft_adapter(dir.path()).config.target_modules,
            (std::vector<std::string>{"down_proj", "q_proj", "v_proj"}));
}

TEST(PeftAdapter, AcceptsLaterPeftOptionsAtTheirDefaultsAndHarmlessInits) {
  testing::TempDir dir;
  write_with_config(dir, [](json& c) {
    c["some_future_option"] = nullptr;
    c["another_future_flag"] = false;
    c["megatron_core"] = "megatron.core";
    c["qalora_group_size"] = 16;
    c["init_lora_weights"] = "gaussian";
    c["task_type"] = nullptr;
    c["peft_version"] = "0.21.2";
  });
  EXPECT_EQ(read_peft_adapter(dir.path()).config.rank, 4);
}

// ---- Refusals: the config.

struct ConfigRefusal {
  const char* key;
  json value;
  const char* words;  // in the message besides the file and key
};

TEST(PeftAdapter, RefusesConfigOptionsAspenCannotApply) {
  const std::vector<ConfigRefusal> cases = {
      {"use_dora", true, "DoRA"},
      {"rank_pattern", {{"q_proj", 8}}, "per-module ranks"},
      {"alpha_pattern", {{"q_proj", 32}}, "per-module alphas"},
      {"modules_to_save", {"lm_head"}, "modules saved beside the adapter"},
      {"bias", "lora_only", "must be \"none\""},
      {"fan_in_fan_out", true, "fan_in_fan_out"},
      {"layers_to_transform", {0}, "subset of the layers"},
      {"exclude_modules", {"q_proj"}, "excluded modules"},
      {"lora_bias", true, "bias on lora_B"},
      {"trainable_token_indices", {1, 2}, "trainable token"},
      {"target_parameters", {"experts.gate_up_proj"}, "target_parameters"},
      {"use_qalora", true, "QALoRA"},
      {"alora_invocation_tokens", {5}, "aLoRA"},
      {"peft_type", "IA3", "must be \"LORA\""},
      {"task_type", "SEQ_CLS", "CAUSAL_LM"},
      {"init_lora_weights", "pissa", "changes the base weights"},
      {"init_lora_weights", "mica", "\"mica\" is not supported"},
      {"a_future_variant", {{"k", 1}}, "does not know"},
      {"r", 2.5, "must be an integer"},
      {"r", 0, "r must be >= 1"},
      {"lora_dropout", 1.0, "[0, 1)"},
      {"lora_alpha", "16", "must be a number"},
      {"target_modules", json::array(), "at least one module"},
      {"target_modules", {"q_proj", 3}, "only strings"},
  };
  for (const ConfigRefusal& refusal : cases) {
    SCOPED_TRACE(std::string(refusal.key) + " = " + refusal.value.dump());
    testing::TempDir dir;
    write_with_config(dir, [&](json& c) { c[refusal.key] = refusal.value; });
    expect_error([&] { read_peft_adapter(dir.path()); },
                 {dir.file(kPeftConfigFile), refusal.key, refusal.words});
  }
}

TEST(PeftAdapter, RefusesAConfigWithoutR) {
  testing::TempDir dir;
  write_with_config(dir, [](json& c) { c.erase("r"); });
  expect_error([&] { read_peft_adapter(dir.path()); },
               {dir.file(kPeftConfigFile), "r", "missing required key"});
}

TEST(PeftAdapter, RefusesMalformedJson) {
  testing::TempDir dir;
  write_peft_adapter(dir.path(), sample_adapter());
  testing::write_bytes(dir.file(kPeftConfigFile), R"({"r": 4, "r": 8})");
  expect_error([&] { read_peft_adapter(dir.path()); }, {dir.file(kPeftConfigFile), "\"r\""});
}

// ---- Refusals: the files.

TEST(PeftAdapter, RefusesAMissingWeightsFileAndNamesAPickledOne) {
  testing::TempDir dir;
  write_peft_adapter(dir.path(), sample_adapter());
  fs::remove(dir.file(kPeftWeightsFile));
  expect_error([&] { read_peft_adapter(dir.path()); }, {dir.file(kPeftWeightsFile), "missing"});
  testing::write_bytes(dir.file("adapter_model.bin"), "pickle");
  expect_error([&] { read_peft_adapter(dir.path()); },
               {dir.file(kPeftWeightsFile), "adapter_model.bin", "safe_serialization"});
}

TEST(PeftAdapter, RefusesAMissingConfig) {
  testing::TempDir dir;
  write_peft_adapter(dir.path(), sample_adapter());
  fs::remove(dir.file(kPeftConfigFile));
  expect_error([&] { read_peft_adapter(dir.path()); }, {dir.file(kPeftConfigFile), "missing"});
}

// ---- Refusals: the tensors.

TEST(PeftAdapter, RefusesKeysThatAreNotALinearsLoraAOrB) {
  const torch::Tensor a = torch::zeros({4, 16});
  const torch::Tensor b = torch::zeros({16, 4});
  struct Case {
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {{{kPrefix + "model.embed_tokens.lora_embedding_A", a}}, {"embeddings"}},
      {{{kPrefix + kQ0 + ".lora_A.default.weight", a}, {kPrefix + kQ0 + ".lora_B.default.weight", b}},
       {"lora_A.default.weight", "without the adapter name"}},
      {{{kPrefix + kQ0 + ".lora_A.weight", a}, {kPrefix + kQ0 + ".lora_B.weight", b},
        {kPrefix + kQ0 + ".lora_magnitude_vector", torch::zeros({16})}},
       {"lora_magnitude_vector", "not a Linear's lora_A or lora_B"}},
      {{{kQ0 + ".lora_A.weight", a}, {kQ0 + ".lora_B.weight", b}}, {"base_model.model."}},
      {{{kPrefix + kQ0 + ".lora_A.weight", a}}, {kQ0, "lora_A but no lora_B"}},
      {{{kPrefix + kQ0 + ".lora_A.weight", torch::zeros({8, 16})},
        {kPrefix + kQ0 + ".lora_B.weight", b}},
       {"rank 8", "r is 4"}},
      {{{kPrefix + kQ0 + ".lora_A.weight", a}, {kPrefix + kQ0 + ".lora_B.weight", torch::zeros({16, 2})}},
       {"lora_B.weight\" has rank 2", "[out_features, r]"}},
      {{{kPrefix + kQ0 + ".lora_A.weight", torch::zeros({4})}, {kPrefix + kQ0 + ".lora_B.weight", b}},
       {"2-D"}},
      {{{kPrefix + kQ0 + ".lora_A.weight", torch::zeros({4, 16}, torch::kInt)},
        {kPrefix + kQ0 + ".lora_B.weight", b}},
       {"floating point"}},
      {{{kPrefix + "model.layers.0.self_attn.k_proj.lora_A.weight", a},
        {kPrefix + "model.layers.0.self_attn.k_proj.lora_B.weight", b}},
       {"k_proj", "not among target_modules"}},
      {{}, {"no adapter tensors"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.words.front());
    testing::TempDir dir;
    write_with_tensors(dir, c.tensors);
    try {
      read_peft_adapter(dir.path());
      ADD_FAILURE() << "expected aspen::Error";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(dir.file(kPeftWeightsFile)));
      for (const std::string& word : c.words) EXPECT_THAT(error.what(), ::testing::HasSubstr(word));
    }
  }
}

TEST(PeftAdapter, WriteRefusesAnInconsistentAdapterAndWritesNothing) {
  testing::TempDir dir;
  const fs::path out = fs::path(dir.path()) / "adapter";
  LoraAdapter adapter = sample_adapter();
  adapter.config.rank = 8;  // the tensors have rank 4
  expect_error([&] { write_peft_adapter(out, adapter); }, {"rank 4", "r is 8"});
  adapter.config.rank = 0;
  expect_error([&] { write_peft_adapter(out, adapter); }, {"r must be >= 1"});
  adapter = sample_adapter();
  adapter.tensors.erase(lora_b_name(kQ0));
  expect_error([&] { write_peft_adapter(out, adapter); }, {kQ0, "lora_A but no lora_B"});
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace aspen::io
