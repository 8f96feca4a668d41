// `aspen bench dock --soak`: a short soak through the real binary (a few processes,
// kills every ~0.4 s, producers and consumers in turn) whose report must show kills of both kinds and every
// invariant holding: rows not lost consumed exactly once per consumer, lost rows
// only with killed producers, nothing duplicated, corrupt, unverified, leaked or
// left in a warehouse. Bad soak options are one-line errors naming the option.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace aspen::cli {
namespace {

TEST(BenchDockSoak, ShortSoakWithKillsKeepsEveryInvariant) {
  const auto result = testing::run_command(
      testing::aspen_cli() +
      " bench dock --soak 3 --producers 3 --consumers 3 --consumer-names 2 --kill-every 0.4"
      " --seed 7 --max-row-bytes 65536 --lease 1");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_TRUE(report["invariants_hold"].get<bool>()) << report.dump(2);
  EXPECT_TRUE(report["violations"].empty());
  for (const char* zero : {"duplicates", "integrity_failures", "unverified_acks", "unconsumed",
                           "leaked_leases"}) {
    EXPECT_EQ(report[zero], 0) << zero;
  }
  EXPECT_EQ(report["controller"]["live_rows"], 0);
  EXPECT_EQ(report["warehouses"]["bytes_held"], 0);
  EXPECT_EQ(report["warehouses"]["rows_held"], 0);
  EXPECT_GT(report["kills"]["producers"].get<int>(), 0) << report.dump(2);
  EXPECT_GT(report["kills"]["consumers"].get<int>(), 0) << report.dump(2);
  // Every row produced is consumed by both consumers or lost with its producer.
  const int64_t produced = report["rows_produced"], lost = report["rows_lost"];
  EXPECT_GT(produced, lost);
  for (const char* name : {"c0", "c1"}) {
    const int64_t consumed = report["rows_consumed"][name];
    EXPECT_GE(consumed, produced - lost) << name;
    EXPECT_LE(consumed, produced) << name;
  }
  const auto& why = report["lost"];
  EXPECT_EQ(why["published_unconsumed"].get<int64_t>() +
                why["published_partly_consumed"].get<int64_t>() +
                why["unpublished"].get<int64_t>(),
            lost);
  EXPECT_EQ(report["rows_published"].get<int64_t>(), produced - why["unpublished"].get<int64_t>());
  EXPECT_GT(report["bytes_moved"].get<int64_t>(), 0);
}

TEST(BenchDockSoak, MoreConsumerNamesThanConsumersIsAnError) {
  const auto result = testing::run_command(
      testing::aspen_cli() + " bench dock --soak 1 --consumers 2 --consumer-names 3");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--consumer-names"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
