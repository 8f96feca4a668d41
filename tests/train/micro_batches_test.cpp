// Sequence packing: plans never split rows, keep every row once, respect the token
// budget and balance loads; packed indices line up with the model's log-prob layout.
#include "aspen/train/micro_batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "aspen/train/policy_logprobs.h"
#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

std::vector<int64_t> loads(const std::vector<std::vector<int64_t>>& plan,
                           const std::vector<int64_t>& lengths) {
  std::vector<int64_t> out;
  for (const auto& bin : plan) {
    int64_t sum = 0;
    for (int64_t row : bin) sum += lengths[row];
    out.push_back(sum);
  }
  return out;
}

TEST(PlanMicroBatches, EveryRowOnceWithinBudgetAndBalanced) {
  const std::vector<int64_t> lengths = {30, 7, 12, 25, 3, 18, 9, 22, 14, 5, 11, 27};
  const int64_t budget = 64;
  const auto plan = plan_micro_batches(lengths, budget);
  std::vector<int64_t> seen;
  for (const auto& bin : plan) {
    EXPECT_TRUE(std::is_sorted(bin.begin(), bin.end()));
    seen.insert(seen.end(), bin.begin(), bin.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(lengths.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
  const auto l = loads(plan, lengths);
  for (int64_t load : l) EXPECT_LE(load, budget);
  // 183 tokens need >= 3 bins of 64; balanced loads are within one short row of each other.
  EXPECT_EQ(plan.size(), 3u);
  EXPECT_LE(*std::max_element(l.begin(), l.end()) - *std::min_element(l.begin(), l.end()), 5);
}

TEST(PlanMicroBatches, OversizedRowGetsItsOwnMicroBatch) {
  const std::vector<int64_t> lengths = {5, 100, 6, 7};
  const auto plan = plan_micro_batches(lengths, 20);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0], std::vector<int64_t>{1});
  EXPECT_EQ(plan[1], (std::vector<int64_t>{0, 2, 3}));
}

TEST(PlanMicroBatches, GrowsBinsWhenRowsDoNotPackIntoTheMinimum) {
  // 3 rows of 6 under a budget of 10: ceil(18/10) = 2 bins cannot hold them.
  const auto plan = plan_micro_batches({6, 6, 6}, 10);
  EXPECT_EQ(plan.size(), 3u);
}

TEST(PlanMicroBatches, RejectsZeroBudget) {
  EXPECT_THROW(plan_micro_batches({1}, 0), Error);
}

TEST(PackRows, LayoutAndColumnsFollowTheRows) {
  TrainBatch batch = testing::tiny_batch({{2, 3}, {1, 2}, {3, 0}});
  batch.token_columns["advantages"] = torch::arange(5, torch::kFloat);
  batch.row_columns["score"] = torch::tensor({10.0f, 20.0f, 30.0f});
  const MicroBatch mb = pack_rows(batch, {1, 0, 2}, torch::kCPU);
  EXPECT_EQ(mb.num_tokens, 3 + 5 + 3);
  EXPECT_EQ(mb.num_response_tokens, 5);
  EXPECT_TRUE(torch::equal(mb.cu_seqlens, torch::tensor({0, 3, 8, 11}, torch::kLong)));
  EXPECT_TRUE(torch::equal(mb.response_cu_seqlens, torch::tensor({0, 2, 5, 5}, torch::kLong)));
  // Row 1 (prompt 1): its tokens sit at 1, 2, predicted from 0, 1. Row 0 starts at 3
  // (prompt 2): tokens at 5..7, predicted from 4..6.
  EXPECT_TRUE(torch::equal(mb.hidden_index, torch::tensor({0, 1, 4, 5, 6}, torch::kLong)));
  // token_logprobs drops one entry per earlier sequence: row 0's entries shift by 1.
  EXPECT_TRUE(torch::equal(mb.logprob_index, torch::tensor({0, 1, 3, 4, 5}, torch::kLong)));
  EXPECT_TRUE(torch::equal(mb.target_ids, mb.input_ids.index_select(0, mb.hidden_index + 1)));
  EXPECT_TRUE(torch::equal(mb.token_columns.at("advantages"),
                           torch::tensor({3.0f, 4.0f, 0.0f, 1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(mb.row_columns.at("score"), torch::tensor({20.0f, 10.0f, 30.0f})));
}

TEST(PackRows, ResponseLogprobsMatchTokenLogprobsAtLogprobIndex) {
  QwenForCausalLM model = testing::tiny_model();
  TrainBatch batch = testing::tiny_batch({{3, 4}, {1, 5}, {2, 2}});
  const MicroBatch mb = pack_rows(batch, {0, 1, 2}, torch::kCPU);
  torch::NoGradGuard no_grad;
  const torch::Tensor all = model->token_logprobs(mb.input_ids, mb.cu_seqlens).logprobs;
  const torch::Tensor ours = response_logprobs(model, mb, {}, /*recompute=*/false).logprobs;
  EXPECT_TRUE(torch::allclose(ours, all.index_select(0, mb.logprob_index), 1e-6, 1e-6));
}

TEST(MakeMicroBatches, NoPaddingAndEveryResponseTokenOnce) {
  TrainBatch batch = testing::tiny_batch({{4, 9}, {2, 3}, {5, 1}, {1, 7}, {3, 3}, {6, 6}});
  std::vector<int64_t> rows = {0, 1, 2, 3, 4, 5};
  const auto mbs = make_micro_batches(batch, rows, 16, torch::kCPU);
  const PackingStats stats = packing_stats(mbs);
  EXPECT_EQ(stats.padding, 0);
  EXPECT_EQ(stats.tokens, 4 + 9 + 2 + 3 + 5 + 1 + 1 + 7 + 3 + 3 + 6 + 6);
  EXPECT_LE(stats.max_tokens, 16);
  std::vector<int64_t> covered;
  for (const auto& mb : mbs) {
    auto idx = mb.batch_token_index;
    covered.insert(covered.end(), idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  }
  std::sort(covered.begin(), covered.end());
  std::vector<int64_t> all(static_cast<size_t>(batch.num_response_tokens()));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(covered, all);
}

}  // namespace
}  // namespace aspen::train
