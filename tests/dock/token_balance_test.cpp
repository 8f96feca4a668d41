// balance_by_tokens: every row assigned once, max load within Graham's bound on
// random inputs, and exact on hand-checked cases.
#include "aspen/dock/token_balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace aspen::dock {
namespace {

TEST(TokenBalanceTest, HandCheckedPartitions) {
  // {8,7,6,5,4} over 2 ranks: optimum 15 (8+7 | 6+5+4); LPT gives 17, KK gives 16...
  // the best candidate must be no worse than 16.
  TokenPartition p = balance_by_tokens({8, 7, 6, 5, 4}, 2);
  EXPECT_LE(*std::max_element(p.loads.begin(), p.loads.end()), 16);
  // Equal items split evenly.
  p = balance_by_tokens({5, 5, 5, 5, 5, 5}, 3);
  EXPECT_EQ(p.loads, (std::vector<int64_t>{10, 10, 10}));
  EXPECT_DOUBLE_EQ(p.imbalance, 0.0);
  // Fewer items than ranks: some ranks empty.
  p = balance_by_tokens({3}, 4);
  EXPECT_DOUBLE_EQ(p.imbalance, 3.0);
}

TEST(TokenBalanceTest, RandomInputsStayWithinGrahamBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int ranks = 1 + static_cast<int>(rng() % 8);
    std::vector<int64_t> weights(1 + rng() % 64);
    // Long-tailed lengths, like real responses.
    std::lognormal_distribution<double> length(5.0, 1.0);
    for (int64_t& w : weights) w = static_cast<int64_t>(length(rng));
    TokenPartition p = balance_by_tokens(weights, ranks);
    std::vector<int> seen;
    for (const auto& rank : p.ranks) seen.insert(seen.end(), rank.begin(), rank.end());
    std::sort(seen.begin(), seen.end());
    std::vector<int> all(weights.size());
    std::iota(all.begin(), all.end(), 0);
    ASSERT_EQ(seen, all);
    const int64_t max_load = *std::max_element(p.loads.begin(), p.loads.end());
    EXPECT_LE(static_cast<double>(max_load), token_balance_bound(weights, ranks) + 1e-9);
  }
}

}  // namespace
}  // namespace aspen::dock
