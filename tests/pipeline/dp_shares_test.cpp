// split_balanced gives each data-parallel rank the rows a balanced dock claim would.
#include "aspen/pipeline/dp_shares.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "aspen/dock/token_balance.h"

namespace aspen::pipeline {
namespace {

TrainBatch batch_with_lengths(const std::vector<int>& response_lengths) {
  TrainBatch batch;
  int64_t total = 0;
  for (size_t i = 0; i < response_lengths.size(); ++i) {
    batch.prompts.push_back(std::vector<int64_t>(2 + i % 3, 1));
    batch.responses.push_back(std::vector<int64_t>(static_cast<size_t>(response_lengths[i]), 2));
    total += response_lengths[i];
  }
  // Each token's value is its row index: shows the columns travel with their rows.
  std::vector<float> owner;
  for (size_t i = 0; i < response_lengths.size(); ++i) {
    owner.insert(owner.end(), static_cast<size_t>(response_lengths[i]), static_cast<float>(i));
  }
  batch.token_columns["owner"] = torch::tensor(owner);
  EXPECT_EQ(batch.token_columns["owner"].size(0), total);
  return batch;
}

TEST(DpShares, SameBalancedPartitionAsTheDockAndEveryRowOnce) {
  const std::vector<int> lengths = {9, 1, 7, 3, 3, 8, 2, 6, 5, 4};
  const TrainBatch batch = batch_with_lengths(lengths);
  const auto shares = balanced_share_rows(batch, 3);
  const TokenPartition dock =
      balance_by_tokens(std::vector<int64_t>(lengths.begin(), lengths.end()), 3);
  ASSERT_EQ(shares.size(), 3u);
  std::vector<int64_t> all;
  for (size_t r = 0; r < shares.size(); ++r) {
    std::vector<int64_t> expected(dock.ranks[r].begin(), dock.ranks[r].end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(shares[r], expected);
    all.insert(all.end(), shares[r].begin(), shares[r].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  const auto locals = split_balanced(batch, 3);
  for (size_t r = 0; r < locals.size(); ++r) {
    locals[r].validate();
    int64_t tokens = 0;
    for (size_t i = 0; i < shares[r].size(); ++i) {
      EXPECT_EQ(locals[r].responses[i], batch.responses[shares[r][i]]);
      tokens += lengths[shares[r][i]];
    }
    EXPECT_EQ(tokens, dock.loads[r]);
    const auto offsets = locals[r].response_offsets();
    for (size_t i = 0; i < shares[r].size(); ++i) {
      const auto owned = locals[r].token_columns.at("owner").slice(0, offsets[i], offsets[i + 1]);
      EXPECT_TRUE(owned.eq(static_cast<float>(shares[r][i])).all().item<bool>());
    }
  }
}

TEST(DpShares, MoreRanksThanRowsLeavesSomeEmpty) {
  const auto locals = split_balanced(batch_with_lengths({4, 2}), 3);
  ASSERT_EQ(locals.size(), 3u);
  int64_t rows = 0;
  for (const auto& local : locals) rows += local.num_rows();
  EXPECT_EQ(rows, 2);
}

}  // namespace
}  // namespace aspen::pipeline
