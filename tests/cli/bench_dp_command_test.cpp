// `aspen bench dp` smoke test: a tiny model, one update per configuration; all three
// configurations train the same global tokens and report a throughput.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

TEST(BenchDpCommand, TinyRunReportsEveryConfiguration) {
  const auto result = testing::run_command(testing::aspen_cli() +
                                           " bench dp --model tiny --rows 8 --updates 1"
                                           " --warmup 0 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  const auto tokens = json["workload"]["tokens_per_update"].get<int64_t>();
  for (const char* name : {"one_proc_one_thread", "one_proc_two_threads", "two_procs_one_thread"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(json.contains(name)) << result.out;
    EXPECT_GT(json[name]["tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(json[name]["seconds"].get<double>(), 0.0);
    EXPECT_EQ(json[name]["tokens"].get<int64_t>(), tokens);  // every rank's share counted
  }
  EXPECT_EQ(json["two_procs_one_thread"]["processes"], 2);
  EXPECT_EQ(json["one_proc_two_threads"]["threads_per_process"], 2);
  EXPECT_GT(json["speedup_dp_vs_threads"].get<double>(), 0.0);
}

TEST(BenchDpCommand, BadOptionIsAnError) {
  const auto result = testing::run_command(testing::aspen_cli() + " bench dp --model huge --json");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--model"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
