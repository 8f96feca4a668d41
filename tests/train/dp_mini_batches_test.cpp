// Data-parallel mini-batch schedule and row selection: every rank steps the same number
// of times, one rank reproduces the single-rank schedule, and shares cover every row.
#include "aspen/train/dp_mini_batches.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "aspen/train/batch_rows.h"
#include "aspen/train/mini_batches.h"
#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

TEST(DpMiniBatches, OneRankIsTheSingleRankSchedule) {
  for (int64_t n : {0, 1, 5, 8, 10}) {
    for (int64_t m : {-1, 0, 1, 3, 4, 8, 100}) {
      for (bool shuffle : {false, true}) {
        EXPECT_EQ(dp_mini_batch_rows(n, n, m, shuffle, 7, 2), mini_batch_rows(n, m, shuffle, 7, 2))
            << "n=" << n << " m=" << m << " shuffle=" << shuffle;
      }
    }
  }
}

TEST(DpMiniBatches, EveryRankTakesTheSameStepsAndSharesEachMiniBatch) {
  const std::vector<int64_t> local = {3, 5, 0, 2};  // N = 10, one rank without rows
  const int64_t n = 10;
  const int64_t m = 4;
  ASSERT_EQ(dp_steps_per_epoch(n, m), 3);
  std::vector<int64_t> union_sizes(3, 0);
  for (int64_t rows : local) {
    const auto steps = dp_mini_batch_rows(rows, n, m, /*shuffle=*/true, 1, 0);
    ASSERT_EQ(steps.size(), 3u) << rows << " local rows";
    std::vector<int64_t> seen;
    for (size_t j = 0; j < steps.size(); ++j) {
      union_sizes[j] += static_cast<int64_t>(steps[j].size());
      seen.insert(seen.end(), steps[j].begin(), steps[j].end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) all[static_cast<size_t>(i)] = i;
    EXPECT_EQ(seen, all);  // every local row exactly once per epoch
  }
  // About M rows per global step (proportional shares, floors), all rows in total.
  EXPECT_EQ(union_sizes[0] + union_sizes[1] + union_sizes[2], n);
  for (int64_t size : union_sizes) {
    EXPECT_GE(size, m - 2);
    EXPECT_LE(size, m + 2);
  }
}

TEST(DpMiniBatches, EmptyGlobalBatchHasNoStepsAndBadCountsAreErrors) {
  EXPECT_TRUE(dp_mini_batch_rows(0, 0, 4, false, 0, 0).empty());
  EXPECT_THROW(dp_mini_batch_rows(5, 4, 2, false, 0, 0), Error);
  EXPECT_THROW(dp_mini_batch_rows(-1, 4, 2, false, 0, 0), Error);
  // More steps than local rows: some local steps are empty, the count still matches.
  const auto steps = dp_mini_batch_rows(1, 8, 2, false, 0, 0);
  ASSERT_EQ(steps.size(), 4u);
  int64_t rows = 0;
  for (const auto& s : steps) rows += static_cast<int64_t>(s.size());
  EXPECT_EQ(rows, 1);
}

TEST(BatchRows, SelectRepacksTokenAndRowColumns) {
  TrainBatch batch = testing::tiny_batch({{2, 3}, {1, 0}, {3, 2}});
  batch.token_columns["t"] = torch::arange(5, torch::kFloat);  // rows own [0,3) [3,3) [3,5)
  batch.row_columns["r"] = torch::tensor({10.0f, 11.0f, 12.0f});
  const TrainBatch picked = select_rows(batch, {2, 0, 1});
  picked.validate();
  EXPECT_EQ(picked.prompts[0], batch.prompts[2]);
  EXPECT_EQ(picked.responses[1], batch.responses[0]);
  EXPECT_TRUE(torch::equal(picked.token_columns.at("t"), torch::tensor({3.0f, 4.0f, 0.0f, 1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(picked.row_columns.at("r"), torch::tensor({12.0f, 10.0f, 11.0f})));
  const TrainBatch none = select_rows(batch, {});
  EXPECT_EQ(none.num_rows(), 0);
  EXPECT_EQ(none.token_columns.at("t").size(0), 0);
  EXPECT_THROW(select_rows(batch, {3}), Error);
}

}  // namespace
}  // namespace aspen::train
