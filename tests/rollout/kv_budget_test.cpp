// KvCacheBudget: a fixed MiB budget as given, or a share of the memory free now
// (MemAvailable on CPU); one of the two, a sane share, errors naming the option.
#include "aspen/rollout/kv_budget.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::rollout {
namespace {

TEST(KvBudget, MegabytesAreTakenAsGiven) {
  EXPECT_EQ(kv_cache_bytes({256, 0.0}, torch::kCPU, "--kv-cache-mb"), 256LL << 20);
}

// 9 * 10^12 MiB overflowed the byte count and left the engine a single block.
TEST(KvBudget, MegabytesBeyondTheFreeMemoryAreAnErrorNamingTheOption) {
  const int64_t free_mb = free_memory_bytes(torch::kCPU) >> 20;
  for (const int64_t mb : {int64_t{9000000000000}, free_mb * 4}) {
    try {
      kv_cache_bytes({mb, 0.0}, torch::kCPU, "--kv-cache-mb");
      FAIL() << mb << " MiB was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), "--kv-cache-mb");
      EXPECT_NE(e.problem().find(std::to_string(mb) + " MiB is more than"), std::string::npos)
          << e.what();
    }
  }
}

TEST(KvBudget, AFractionIsAShareOfTheMemoryFreeNow) {
  const int64_t free = free_memory_bytes(torch::kCPU);
  ASSERT_GT(free, 64LL << 20);
  const int64_t bytes = kv_cache_bytes({0, 0.25}, torch::kCPU, "--kv-cache-fraction");
  // MemAvailable moves a little between the two reads (other processes).
  EXPECT_NEAR(static_cast<double>(bytes), 0.25 * free, 0.05 * free);
}

TEST(KvBudget, OneOfTheTwoAndASaneShareOrAnErrorNamingTheOption) {
  auto input_of = [](const KvCacheBudget& budget) -> std::string {
    try {
      kv_cache_bytes(budget, torch::kCPU, "--kv-cache-fraction");
    } catch (const Error& error) {
      return error.input();
    }
    return "accepted";
  };
  EXPECT_EQ(input_of({64, 0.5}), "--kv-cache-fraction");
  EXPECT_EQ(input_of({0, 0.0}), "--kv-cache-fraction");
  EXPECT_EQ(input_of({0, 0.99}), "--kv-cache-fraction");
  EXPECT_EQ(input_of({-5, 0.0}), "--kv-cache-fraction");
  EXPECT_EQ(input_of({0, 0.5}), "accepted");
}

}  // namespace
}  // namespace aspen::rollout
