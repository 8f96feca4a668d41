#include "aspen/algo/packed.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/algo/groups.h"
#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::ivec;

TEST(PackedSeqs, DerivesLengthsAndRowIdsIncludingEmptySequence) {
  PackedSeqs p = PackedSeqs::from_lengths({2, 0, 3});
  EXPECT_EQ(p.num_seqs(), 3);
  EXPECT_EQ(p.num_tokens(), 5);
  EXPECT_TRUE(torch::equal(p.cu_seqlens(), ivec({0, 2, 2, 5})));
  EXPECT_TRUE(torch::equal(p.lengths(), ivec({2, 0, 3})));
  EXPECT_TRUE(torch::equal(p.row_ids(), ivec({0, 0, 2, 2, 2})));
}

TEST(PackedSeqs, RejectsMalformedOffsets) {
  EXPECT_THROW(PackedSeqs::from_cu_seqlens(ivec({1, 2})), Error);     // cu[0] != 0
  EXPECT_THROW(PackedSeqs::from_cu_seqlens(ivec({0, 3, 2})), Error);  // decreasing
  EXPECT_THROW(PackedSeqs::from_cu_seqlens(dvec({0, 2})), Error);     // not int64
  EXPECT_THROW(PackedSeqs::from_cu_seqlens(torch::zeros({0}, torch::kLong)), Error);
  PackedSeqs p = PackedSeqs::from_lengths({2});
  EXPECT_THROW(p.check_tokens(dvec({1, 2, 3}), "x"), Error);
  EXPECT_THROW(p.check_rows(dvec({1, 2}), "x"), Error);
}

TEST(PackedSeqs, BroadcastAndSegmentSum) {
  PackedSeqs p = PackedSeqs::from_lengths({2, 0, 3});
  expect_values(broadcast_rows(dvec({1, 2, 3}), p), {1, 1, 3, 3, 3});
  // [1+2], [], [3+4+5]
  expect_values(segment_sum(dvec({1, 2, 3, 4, 5}), p), {3, 0, 12});
}

TEST(PackedSeqs, SegmentSumIsDifferentiable) {
  PackedSeqs p = PackedSeqs::from_lengths({2, 1});
  torch::Tensor x = dvec({1, 2, 3}).requires_grad_(true);
  // d/dx of (2 * s0 + 5 * s1) = [2, 2, 5]
  (segment_sum(x, p) * dvec({2, 5})).sum().backward();
  expect_values(x.grad(), {2, 2, 5});
}

TEST(PackedSeqs, PlaceAtLastToken) {
  PackedSeqs p = PackedSeqs::from_lengths({2, 3});
  expect_values(place_at_last_token(dvec({7, 9}), p), {0, 7, 0, 0, 9});
  EXPECT_THROW(place_at_last_token(dvec({7, 9}), PackedSeqs::from_lengths({2, 0})), Error);
}

TEST(PackedSeqs, DiscountedReverseCumsumStaysInsideEachSequence) {
  PackedSeqs p = PackedSeqs::from_lengths({2, 3});
  // gamma 0.5. seq0: out1 = 2, out0 = 1 + 0.5*2 = 2.
  // seq1: out4 = 5, out3 = 4 + 2.5 = 6.5, out2 = 3 + 3.25 = 6.25.
  torch::Tensor out = discounted_reverse_cumsum(dvec({1, 2, 3, 4, 5}), p, 0.5);
  expect_values(out, {2, 2, 6.25, 6.5, 5});
  EXPECT_EQ(out.scalar_type(), torch::kDouble);
  // Float input comes back as float.
  EXPECT_EQ(discounted_reverse_cumsum(torch::ones({5}), p, 1.0).scalar_type(), torch::kFloat);
}

TEST(GroupIndex, MeanAndUnbiasedStdPerGroupWithArbitraryIds) {
  // ids [7,3,7,3,9] -> groups 3: rows {1,3}, 7: rows {0,2}, 9: row {4}.
  GroupIndex g = GroupIndex::from_ids(ivec({7, 3, 7, 3, 9}));
  EXPECT_TRUE(torch::equal(g.ids, ivec({3, 7, 9})));
  EXPECT_TRUE(torch::equal(g.counts, ivec({2, 2, 1})));
  torch::Tensor v = dvec({1, 2, 3, 4, 5});
  // group 3: (2+4)/2 = 3; group 7: (1+3)/2 = 2; group 9: 5.
  expect_values(group_mean(v, g), {3, 2, 5});
  // deviations +-1 -> sum sq 2, / (n-1) = 2 -> sqrt(2); singleton: 0/0 = NaN.
  torch::Tensor std = group_std(v, g);
  EXPECT_NEAR(std[0].item<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(std[1].item<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_TRUE(std::isnan(std[2].item<double>()));
  EXPECT_THROW(GroupIndex::from_ids(dvec({1, 2})), Error);
}

}  // namespace
}  // namespace aspen::algo
