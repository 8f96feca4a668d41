// An exported policy is a whole HF model directory: the files of the source model
// directory that a model needs besides its weights (tokenizer_config.json with the
// chat template, generation_config.json, ...) are carried into final/ unchanged, so
// Aspen's output chats and stops like the model it came from.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/util/file.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

TEST(ExportPolicy, CarriesTheSourceDirectorysTokenizerConfigAndGenerationConfig) {
  const std::string source = ::testing::TempDir() + "/aspen_export_source";
  const std::string out = ::testing::TempDir() + "/aspen_export_out";
  fs::remove_all(source);
  fs::remove_all(out);
  // A source directory: the tiny model as exported, plus what a real checkpoint ships.
  RlSetup tiny = build_rl_setup(testing::tiny_run_config({}));
  export_policy(tiny, source);
  const int64_t eos = tiny.eos_token_ids.front();
  const std::string tokenizer_config = nlohmann::json{
      {"chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
      {"model_max_length", 4096}}.dump(2);
  const std::string generation_config = nlohmann::json{{"eos_token_id", {eos}}}.dump(2);
  write_file_atomic(source + "/tokenizer_config.json", tokenizer_config);
  write_file_atomic(source + "/generation_config.json", generation_config);
  write_file_atomic(source + "/merges.txt", "#version: 0.2\n");

  RlSetup loaded = build_rl_setup(testing::tiny_run_config({"model.path=" + source}));
  export_policy(loaded, out);
  EXPECT_EQ(read_file(out + "/tokenizer_config.json"), tokenizer_config);
  EXPECT_EQ(read_file(out + "/generation_config.json"), generation_config);
  EXPECT_EQ(read_file(out + "/merges.txt"), "#version: 0.2\n");
  EXPECT_EQ(read_file(out + "/tokenizer.json"), read_file(source + "/tokenizer.json"));
  EXPECT_FALSE(fs::exists(out + "/special_tokens_map.json")) << "only files the source had";
  // And the export loads again as a model directory.
  EXPECT_NO_THROW(build_rl_setup(testing::tiny_run_config({"model.path=" + out})));
}

}  // namespace
}  // namespace aspen::pipeline
