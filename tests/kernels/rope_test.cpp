#include "aspen/kernels/rope.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "grad_compare.h"

namespace aspen::kernels {
namespace {

using testing::expect_same_value_and_grads;

TEST(Rope, TableFollowsHfInvFreq) {
  auto positions = torch::tensor({0, 1, 5}, torch::kLong);
  RopeTable table = make_rope_table(positions, /*head_dim=*/8, /*theta=*/10000.0);
  ASSERT_EQ(table.cos.sizes(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 4; ++i) {
    const double inv_freq = 1.0 / std::pow(10000.0, 2.0 * i / 8.0);
    EXPECT_NEAR(table.cos[2][i].item<float>(), std::cos(5 * inv_freq), 1e-6);
    EXPECT_NEAR(table.sin[2][i].item<float>(), std::sin(5 * inv_freq), 1e-6);
    EXPECT_FLOAT_EQ(table.cos[0][i].item<float>(), 1.0f);
  }
}

TEST(Rope, MatchesRotateHalfReferenceWithGrads) {
  torch::manual_seed(0);
  auto positions = torch::tensor({0, 1, 2, 0, 1, 7, 100}, torch::kLong);  // packed: restarts
  RopeTable table = make_rope_table(positions, 16, 1e6);
  auto x = torch::randn({7, 3, 16}, torch::kDouble);
  expect_same_value_and_grads([&](const auto& in) { return apply_rope(in[0], table); },
                              [&](const auto& in) { return apply_rope_reference(in[0], table); },
                              {x}, 1e-12);
}

TEST(Rope, PreservesNormAndRelativeAngle) {
  // Rotation: |rope(x)| = |x|, and <rope(q, p), rope(k, p')> depends on p - p' only.
  torch::manual_seed(1);
  auto q = torch::randn({1, 1, 8}, torch::kDouble);
  auto k = torch::randn({1, 1, 8}, torch::kDouble);
  auto rot = [&](const torch::Tensor& x, int64_t p) {
    return apply_rope(x, make_rope_table(torch::tensor({p}, torch::kLong), 8, 10000.0));
  };
  EXPECT_NEAR(rot(q, 9).norm().item<double>(), q.norm().item<double>(), 1e-6);
  const double a = (rot(q, 5) * rot(k, 2)).sum().item<double>();
  const double b = (rot(q, 13) * rot(k, 10)).sum().item<double>();
  EXPECT_NEAR(a, b, 1e-5);
}

TEST(Rope, Fp32AndBf16CpuLoopsEqualTheReferenceOnStridedHeadViews) {
  torch::manual_seed(3);
  RopeTable table = make_rope_table(torch::tensor({0, 5, 9, 130}, torch::kLong), 16, 1e6);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    // k's heads inside a fused [T, q + k + v] output: rows strided by the fused width.
    auto fused_out = torch::randn({4, 80}).to(dtype);
    auto heads = fused_out.narrow(1, 32, 32).view({4, 2, 16});
    ASSERT_FALSE(heads.is_contiguous());
    // One rounding of the fp32 rotation, in both: bit-identical.
    EXPECT_TRUE(torch::equal(apply_rope(heads, table), apply_rope_reference(heads, table)))
        << dtype;
  }
  auto x = torch::randn({4, 3, 16});
  expect_same_value_and_grads([&](const auto& in) { return apply_rope(in[0], table); },
                              [&](const auto& in) { return apply_rope_reference(in[0], table); },
                              {x}, 1e-6);
}

TEST(Rope, Bf16RoundTripsThroughFp32) {
  torch::manual_seed(2);
  RopeTable table = make_rope_table(torch::arange(4, torch::kLong), 8, 10000.0);
  auto x = torch::randn({4, 2, 8});
  auto y16 = apply_rope(x.to(torch::kBFloat16), table);
  EXPECT_EQ(y16.scalar_type(), torch::kBFloat16);
  EXPECT_LE(testing::max_abs_diff(y16, apply_rope(x, table)), 3e-2);
}

}  // namespace
}  // namespace aspen::kernels
