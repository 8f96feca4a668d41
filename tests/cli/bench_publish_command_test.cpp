// `aspen bench publish` and `aspen bench rollout --lora-rank` (issue #38) on tiny
// shapes: the byte counts are the policy's and the adapters' own (fp32), whichever way
// the instance fetches, the unmerged and merged grids line up point by point, and a
// bad option is named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

using testing::run_command;

// Hidden 64, 4 heads and 2 KV heads of 16, MLP 128, 2 layers, vocab 256, rank 4: per
// layer r (in + out) = q 4 (64 + 64), k and v 4 (64 + 32), o 4 (64 + 64), gate, up and
// down 4 (64 + 128): 4,096; 8,192 in all.
constexpr char kTinyShape[] =
    " --layers 2 --hidden-size 64 --intermediate-size 128 --heads 4 --kv-heads 2 --head-dim 16"
    " --vocab-size 256 --lora-rank 4 --reps 1 --threads 1 --json";

nlohmann::json publish(const std::string& extra) {
  const auto result =
      run_command(testing::aspen_cli() + " bench publish" + kTinyShape + extra);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

TEST(BenchPublish, AdapterOnlyPublishMovesTheAdaptersBytesAndFullMovesThePolicys) {
  for (const char* fetch : {"remote", "local"}) {
    const nlohmann::json out = publish(std::string(" --fetch ") + fetch);
    EXPECT_EQ(out["model"]["fetch"], fetch);
    EXPECT_EQ(out["model"]["lora_parameters"], 8192);
    const int64_t parameters = out["model"]["parameters"].get<int64_t>();
    EXPECT_EQ(out["full"]["bytes"].get<int64_t>(), 4 * parameters) << fetch;
    EXPECT_EQ(out["adapter"]["bytes"].get<int64_t>(), 4 * 8192) << fetch;
    EXPECT_EQ(out["adapter"]["tensors"], 2 * 7 * 2);  // A and B, 7 targets, 2 layers
    EXPECT_DOUBLE_EQ(out["bytes_ratio"].get<double>(), parameters / 8192.0);
    EXPECT_GT(out["full"]["seconds"].get<double>(), 0.0);
    EXPECT_GT(out["adapter"]["seconds"].get<double>(), 0.0);
  }
}

TEST(BenchPublish, ABadFetchModeIsNamed) {
  const auto result = run_command(testing::aspen_cli() + " bench publish" + kTinyShape +
                                  " --fetch sideways");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--fetch"), std::string::npos) << result.err;
}

TEST(BenchRolloutLora, UnmergedAndMergedGridsLineUpWithTheMergeCost) {
  const auto result = run_command(testing::aspen_cli() +
                                  " bench rollout --threads 1 --prompt-lens 8 --gen-lens 8"
                                  " --parallel 1 2 --long-tail-requests 0 --no-sampler"
                                  " --lora-rank 4 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json out = nlohmann::json::parse(result.out);
  ASSERT_EQ(out["grid"].size(), 2u);
  ASSERT_EQ(out["grid_merged"].size(), 2u);
  ASSERT_EQ(out["lora"]["decode_ratio"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out["grid"][i]["parallel"], out["grid_merged"][i]["parallel"]);
    const double expected = out["grid"][i]["decode_tps"].get<double>() /
                            out["grid_merged"][i]["decode_tps"].get<double>();
    EXPECT_DOUBLE_EQ(out["lora"]["decode_ratio"][i].get<double>(), expected);
  }
  // The bench model (hidden 256, 4/2 heads of 64, MLP 768, 8 layers): the targets'
  // weights a merged instance keeps, 8 (2 x 256^2 + 2 x 256 x 128 + 3 x 256 x 768) fp32.
  EXPECT_EQ(out["lora"]["base_copy_bytes"], 4 * 8 * (2 * 65536 + 2 * 32768 + 3 * 196608));
  // Its adapters: 8 layers x 4 (2 (256 + 256) + 2 (256 + 128) + 3 (256 + 768)) fp32.
  EXPECT_EQ(out["lora"]["adapter_bytes"], 4 * 8 * 4 * (2 * 512 + 2 * 384 + 3 * 1024));
  EXPECT_GT(out["lora"]["merge_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace aspen::cli
