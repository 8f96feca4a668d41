#include "aspen/algo/aggregate.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::scalar;

AggOptions mode(AggMode m) {
  AggOptions o;
  o.mode = m;
  return o;
}

// l = [1 | 2 3 | 4 5 6], lengths [1, 2, 3]; sums per sequence [1, 5, 15], total 21.
class AggregateTest : public ::testing::Test {
 protected:
  PackedSeqs packed = PackedSeqs::from_lengths({1, 2, 3});
  torch::Tensor l = dvec({1, 2, 3, 4, 5, 6});
};

TEST_F(AggregateTest, TokenMean) {
  EXPECT_NEAR(scalar(aggregate(l, packed, mode(AggMode::kTokenMean))), 21.0 / 6, 1e-12);
}

TEST_F(AggregateTest, SeqMeanTokenMean) {
  // per-sequence means 1, 2.5, 5 -> (1 + 2.5 + 5) / 3
  EXPECT_NEAR(scalar(aggregate(l, packed, mode(AggMode::kSeqMeanTokenMean))), 8.5 / 3, 1e-12);
}

TEST_F(AggregateTest, SeqMeanTokenSum) {
  // (1 + 5 + 15) / 3 = 7
  EXPECT_NEAR(scalar(aggregate(l, packed, mode(AggMode::kSeqMeanTokenSum))), 7.0, 1e-12);
}

TEST_F(AggregateTest, SeqMeanTokenSumNorm) {
  AggOptions o = mode(AggMode::kSeqMeanTokenSumNorm);
  o.norm_length = 4;  // (1/4 + 5/4 + 15/4) / 3 = 21 / 12
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 1.75, 1e-12);
  o.norm_length = 0;
  EXPECT_THROW(aggregate(l, packed, o), Error);
}

TEST_F(AggregateTest, GlobalDenominatorsReplaceLocalCounts) {
  AggOptions o = mode(AggMode::kTokenMean);
  o.global_tokens = 12;  // 21 / 12
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 1.75, 1e-12);
  o = mode(AggMode::kSeqMeanTokenSum);
  o.global_seqs = 7;  // 21 / 7
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 3.0, 1e-12);
  o.global_seqs = 0;
  EXPECT_THROW(aggregate(l, packed, o), Error);
}

TEST_F(AggregateTest, MicroBatchesWithGlobalDenominatorsSumToWholeBatch) {
  // Pieces: [1] (lengths {1}) and [2..6] (lengths {2, 3}).
  PackedSeqs a = PackedSeqs::from_lengths({1});
  PackedSeqs b = PackedSeqs::from_lengths({2, 3});
  torch::Tensor la = l.slice(0, 0, 1), lb = l.slice(0, 1);
  for (AggMode m : {AggMode::kTokenMean, AggMode::kSeqMeanTokenMean, AggMode::kSeqMeanTokenSum}) {
    AggOptions o = mode(m);
    o.global_tokens = 6;
    o.global_seqs = 3;
    const double whole = scalar(aggregate(l, packed, mode(m)));
    const double pieces = scalar(aggregate(la, a, o)) + scalar(aggregate(lb, b, o));
    EXPECT_NEAR(pieces, whole, 1e-12) << agg_mode_name(m);
    // Local denominators would NOT reproduce the whole batch (1 + 20/5 = 5 != 3.5 for token-mean).
    const double naive = scalar(aggregate(la, a, mode(m))) + scalar(aggregate(lb, b, mode(m)));
    EXPECT_GT(std::abs(naive - whole), 0.1) << agg_mode_name(m);
  }
}

TEST(Aggregate, EmptySequenceContributesZeroAndEmptyBatchIsZero) {
  // lengths [0, 2], l = [1, 3]: seq means 0 and 2 -> (0 + 2) / 2 = 1.
  PackedSeqs p = PackedSeqs::from_lengths({0, 2});
  AggOptions o;
  o.mode = AggMode::kSeqMeanTokenMean;
  EXPECT_NEAR(scalar(aggregate(dvec({1, 3}), p, o)), 1.0, 1e-12);
  PackedSeqs empty = PackedSeqs::from_lengths({});
  EXPECT_EQ(scalar(aggregate(torch::zeros({0}, torch::kDouble), empty, AggOptions{})), 0.0);
}

}  // namespace
}  // namespace aspen::algo
