// Model directories: single-file and sharded weights, their index, and generation_config.json.
#include "aspen/io/model_dir.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "aspen/io/safetensors.h"
#include "io_test_util.h"

namespace aspen::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;
using testing::write_bytes;

std::vector<std::pair<std::string, torch::Tensor>> sample_weights() {
  torch::manual_seed(1);
  return {
      {"model.embed_tokens.weight", torch::randn({16, 8})},              // 512 bytes
      {"model.layers.0.self_attn.q_proj.weight", torch::randn({8, 8})},  // 256
      {"model.layers.0.self_attn.q_proj.bias", torch::randn({8})},       // 32
      {"model.norm.weight", torch::ones({8}).to(torch::kBFloat16)},      // 16
      {"lm_head.weight", torch::randn({16, 8})},                         // 512
  };
}

void expect_loaded(const std::map<std::string, torch::Tensor>& loaded,
                   const std::vector<std::pair<std::string, torch::Tensor>>& expected) {
  ASSERT_EQ(loaded.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(loaded.count(name)) << name;
    EXPECT_TRUE(torch::equal(loaded.at(name), tensor)) << name;
  }
}

TEST(ModelDir, SingleFileRoundTrip) {
  TempDir dir;
  const auto weights = sample_weights();
  save_model_weights(dir.path(), weights);
  EXPECT_TRUE(fs::exists(dir.file("model.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file("model.safetensors.index.json")));
  EXPECT_EQ(SafetensorsReader(dir.file("model.safetensors")).metadata().at("format"), "pt");
  expect_loaded(load_model_weights(dir.path()), weights);
}

TEST(ModelDir, ShardedRoundTripWithIndex) {
  TempDir dir;
  const auto weights = sample_weights();
  save_model_weights(dir.path() + "/nested", weights, /*max_shard_bytes=*/600);
  const std::string root = dir.path() + "/nested/";
  // Greedy: [embed 512] [q 256 + bias 32 + norm 16] [lm_head 512].
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"}) {
    EXPECT_TRUE(fs::exists(root + shard)) << shard;
  }
  EXPECT_FALSE(fs::exists(root + "model.safetensors"));
  const auto index =
      nlohmann::json::parse(testing::read_bytes(root + "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 512 + 256 + 32 + 16 + 512);
  EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");
  expect_loaded(load_model_weights(root), weights);
}

TEST(ModelDir, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  const auto weights = sample_weights();
  save_model_weights(dir.path(), weights, /*max_shard_bytes=*/100);
  // [embed] [q_proj] [bias + norm: 48 bytes fit together] [lm_head]
  EXPECT_TRUE(fs::exists(dir.file("model-00004-of-00004.safetensors")));
  expect_loaded(load_model_weights(dir.path()), weights);
}

TEST(ModelDir, ResavingInAnotherLayoutRemovesStaleFiles) {
  TempDir dir;
  const auto weights = sample_weights();
  save_model_weights(dir.path(), weights, 600);
  save_model_weights(dir.path(), {weights[0]});
  EXPECT_FALSE(fs::exists(dir.file("model.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(dir.file("model-00001-of-00003.safetensors")));
  expect_loaded(load_model_weights(dir.path()), {weights[0]});
  save_model_weights(dir.path(), weights, 600);
  EXPECT_FALSE(fs::exists(dir.file("model.safetensors")));
  expect_loaded(load_model_weights(dir.path()), weights);
}

TEST(ModelDir, SaveRejectsDuplicateNames) {
  TempDir dir;
  const auto weights = sample_weights();
  expect_error([&] { save_model_weights(dir.path(), {weights[0], weights[0]}); }, {"duplicate"});
  expect_error(
      [&] {
        save_model_weights(dir.path(), {weights[0], weights[1], weights[0]}, 600);
      },
      {"duplicate"});
}

class ModelDirIndexErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    write_safetensors(dir_.file("a.safetensors"), {{"x", torch::ones(2)}, {"y", torch::ones(3)}});
    write_safetensors(dir_.file("b.safetensors"), {{"z", torch::ones(1)}});
  }
  void write_index(const std::string& weight_map) {
    write_bytes(dir_.file("model.safetensors.index.json"),
                R"({"metadata": {"total_size": 24}, "weight_map": )" + weight_map + "}");
  }
  std::string index_path() const { return dir_.file("model.safetensors.index.json"); }
  TempDir dir_;
};

TEST_F(ModelDirIndexErrors, ValidIndexLoads) {
  write_index(R"({"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"})");
  EXPECT_EQ(load_model_weights(dir_.path()).size(), 3u);
}

TEST_F(ModelDirIndexErrors, MissingShard) {
  write_index(R"({"x": "a.safetensors", "y": "a.safetensors", "z": "c.safetensors"})");
  expect_error([&] { load_model_weights(dir_.path()); },
               {index_path(), "shard \"c.safetensors\"", "does not exist"});
}

TEST_F(ModelDirIndexErrors, NameMissingFromItsShard) {
  write_index(R"({"x": "a.safetensors", "y": "a.safetensors", "w": "a.safetensors", )"
              R"("z": "b.safetensors"})");
  expect_error([&] { load_model_weights(dir_.path()); }, {"a.safetensors", "\"w\" is missing"});
}

TEST_F(ModelDirIndexErrors, ShardTensorNotInIndex) {
  write_index(R"({"x": "a.safetensors", "z": "b.safetensors"})");
  expect_error([&] { load_model_weights(dir_.path()); }, {"a.safetensors", "\"y\" is not mapped"});
}

TEST_F(ModelDirIndexErrors, NameListedTwice) {
  write_index(R"({"x": "a.safetensors", "y": "a.safetensors", "x": "b.safetensors"})");
  expect_error([&] { load_model_weights(dir_.path()); }, {index_path(), "duplicate key \"x\""});
}

TEST_F(ModelDirIndexErrors, ShardOutsideTheDirectory) {
  write_index(R"({"x": "../a.safetensors"})");
  expect_error([&] { load_model_weights(dir_.path()); }, {index_path(), "\"x\""});
}

TEST_F(ModelDirIndexErrors, MalformedIndex) {
  write_index(R"(["a.safetensors"])");
  expect_error([&] { load_model_weights(dir_.path()); }, {index_path(), "weight_map"});
  write_index("{}");
  expect_error([&] { load_model_weights(dir_.path()); }, {index_path(), "empty"});
  write_bytes(index_path(), "{");
  expect_error([&] { load_model_weights(dir_.path()); }, {index_path(), "invalid JSON"});
}

TEST(ModelDir, NoWeightsAtAll) {
  TempDir dir;
  expect_error([&] { load_model_weights(dir.path()); }, {dir.path(), "no model.safetensors"});
}

TEST(GenerationConfig, AbsentIsNullopt) {
  TempDir dir;
  EXPECT_FALSE(read_generation_config(dir.path()).has_value());
}

TEST(GenerationConfig, ReadsQwen3Defaults) {
  TempDir dir;
  write_bytes(dir.file("generation_config.json"), R"({
    "bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
    "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
    "transformers_version": "4.51.0"})");
  const auto config = read_generation_config(dir.path());
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->eos_token_ids, std::vector<int64_t>({151645, 151643}));
  EXPECT_EQ(config->bos_token_id, 151643);
  EXPECT_EQ(config->pad_token_id, 151643);
  EXPECT_EQ(config->temperature, 0.6);
  EXPECT_EQ(config->top_p, 0.95);
  EXPECT_EQ(config->top_k, 20);
  EXPECT_EQ(config->do_sample, true);
}

TEST(GenerationConfig, SingleEosAndMissingKeys) {
  TempDir dir;
  write_bytes(dir.file("generation_config.json"), R"({"eos_token_id": 2, "top_p": null})");
  const auto config = read_generation_config(dir.path());
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->eos_token_ids, std::vector<int64_t>({2}));
  EXPECT_FALSE(config->temperature.has_value());
  EXPECT_FALSE(config->top_p.has_value());
  EXPECT_FALSE(config->top_k.has_value());
}

TEST(GenerationConfig, RejectsWrongTypes) {
  TempDir dir;
  const std::string path = dir.file("generation_config.json");
  write_bytes(path, R"({"temperature": "hot"})");
  expect_error([&] { read_generation_config(dir.path()); }, {path + ": temperature"});
  write_bytes(path, R"({"eos_token_id": [1, "x"]})");
  expect_error([&] { read_generation_config(dir.path()); }, {path + ": eos_token_id"});
  write_bytes(path, R"({"top_k": 1.5})");
  expect_error([&] { read_generation_config(dir.path()); }, {path + ": top_k"});
  write_bytes(path, "[]");
  expect_error([&] { read_generation_config(dir.path()); }, {path, "JSON object"});
}

}  // namespace
}  // namespace aspen::io
