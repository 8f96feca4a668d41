// `aspen info` holds config.json against the weights beside it, as every command that
// loads the model does (model/pretrained.h, one shared check): a config that
// contradicts the checkpoint is one error line and exit 1, never a description.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "aspen/util/file.h"
#include "cli_test_util.h"
#include "tiny_model_dir.h"

namespace aspen::cli {
namespace {

using testing::run_command;

TEST(InfoCommand, RefusesAConfigThatContradictsTheWeights) {
  const std::string dir = testing::write_tiny_model_dir(testing::scratch_dir() + "/model");
  const auto good = run_command(testing::aspen_cli() + " info --model " + dir);
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(nlohmann::json::parse(good.out)["vocab_size"], 50);
  const std::string config_text = read_file(dir + "/config.json");
  // Each value is one the weights (vocabulary 50, hidden 32, MLP 48, 2 layers, 4 query and
  // 2 key/value heads of 8, no q/k/v bias) contradict.
  const std::vector<std::pair<std::string, nlohmann::json>> lies = {
      {"vocab_size", 1000000000000LL}, {"vocab_size", 51},          {"hidden_size", 64},
      {"intermediate_size", 96},       {"num_hidden_layers", 3},    {"num_hidden_layers", 1},
      {"num_attention_heads", 8},      {"num_key_value_heads", 4},  {"head_dim", 16},
      {"attention_bias", true},        {"eos_token_id", 50}};
  for (const auto& [key, value] : lies) {
    nlohmann::json config = nlohmann::json::parse(config_text);
    config[key] = value;
    write_file_atomic(dir + "/config.json", config.dump());
    const auto result = run_command(testing::aspen_cli() + " info --model " + dir);
    EXPECT_EQ(result.exit_code, 1) << key << " = " << value.dump() << ": " << result.out;
    EXPECT_EQ(result.out, "") << key;
    EXPECT_NE(result.err.find(dir + "/config.json: "), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "one line: " << result.err;
  }
}

}  // namespace
}  // namespace aspen::cli
