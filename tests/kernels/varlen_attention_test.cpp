#include "aspen/kernels/varlen_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "grad_compare.h"

namespace aspen::kernels {
namespace {

// Straight from the formula: one [T, T] mask allowing j <= i within the same
// sequence, kv heads repeated with repeat_interleave (HF repeat_kv order).
torch::Tensor dense_masked_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const std::vector<int64_t>& offsets,
                                     double scale) {
  const int64_t tokens = q.size(0);
  const int64_t group = q.size(1) / k.size(1);
  torch::Tensor allowed = torch::zeros({tokens, tokens}, torch::kBool);
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
      for (int64_t j = offsets[b]; j <= i; ++j) allowed[i][j] = true;
    }
  }
  torch::Tensor kr = k.repeat_interleave(group, 1).transpose(0, 1);  // [H, T, D]
  torch::Tensor vr = v.repeat_interleave(group, 1).transpose(0, 1);
  torch::Tensor scores = torch::matmul(q.transpose(0, 1), kr.transpose(1, 2)) * scale;
  scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), vr).transpose(0, 1);
}

void expect_matches_dense(const std::vector<int64_t>& offsets) {
  torch::manual_seed(0);
  const int64_t tokens = offsets.back(), heads = 6, kv_heads = 2, dim = 8;
  auto q = torch::randn({tokens, heads, dim}, torch::kDouble);
  auto k = torch::randn({tokens, kv_heads, dim}, torch::kDouble);
  auto v = torch::randn({tokens, kv_heads, dim}, torch::kDouble);
  auto cu = torch::tensor(offsets, torch::kLong);
  const double scale = 1.0 / std::sqrt(dim);
  testing::expect_same_value_and_grads(
      [&](const auto& in) { return varlen_causal_attention(in[0], in[1], in[2], cu, scale); },
      [&](const auto& in) { return dense_masked_attention(in[0], in[1], in[2], offsets, scale); },
      {q, k, v}, 1e-12);
}

TEST(VarlenAttention, MatchesDenseBlockDiagonalMaskWithGrads) {
  // Distinct lengths with an empty and a 1-token sequence; repeated lengths
  // interleaved (batched per length, then put back in packed order); repeated lengths
  // in consecutive runs (batched in place); one length only.
  for (const std::vector<int64_t>& offsets :
       {std::vector<int64_t>{0, 5, 5, 6, 13}, std::vector<int64_t>{0, 3, 7, 10, 14, 17, 17, 18},
        std::vector<int64_t>{0, 2, 4, 7, 10, 11}, std::vector<int64_t>{0, 4, 8, 12}}) {
    SCOPED_TRACE(offsets.size());
    expect_matches_dense(offsets);
  }
}

TEST(VarlenAttention, Fp32AndBf16CloseToDouble) {
  torch::manual_seed(1);
  auto q = torch::randn({20, 4, 16});
  auto k = torch::randn({20, 4, 16});
  auto v = torch::randn({20, 4, 16});
  auto cu = torch::tensor({0, 12, 20}, torch::kLong);
  auto want = varlen_causal_attention(q.to(torch::kDouble), k.to(torch::kDouble),
                                      v.to(torch::kDouble), cu, 0.25);
  EXPECT_LE(testing::max_abs_diff(varlen_causal_attention(q, k, v, cu, 0.25), want), 1e-5);
  auto b16 = varlen_causal_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16),
                                     v.to(torch::kBFloat16), cu, 0.25);
  EXPECT_EQ(b16.scalar_type(), torch::kBFloat16);
  EXPECT_LE(testing::max_abs_diff(b16, want), 5e-2);
}

TEST(VarlenAttention, FirstTokenOfEachSequenceSeesOnlyItself) {
  torch::manual_seed(2);
  auto q = torch::randn({6, 2, 4});
  auto k = torch::randn({6, 1, 4});
  auto v = torch::randn({6, 1, 4});
  auto out = varlen_causal_attention(q, k, v, torch::tensor({0, 3, 6}, torch::kLong), 0.5);
  for (int64_t start : {0, 3}) {
    for (int64_t h = 0; h < 2; ++h) EXPECT_TRUE(torch::allclose(out[start][h], v[start][0]));
  }
}

}  // namespace
}  // namespace aspen::kernels
