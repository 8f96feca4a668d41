#include "aspen/kernels/rms_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "grad_compare.h"

namespace aspen::kernels {
namespace {

using testing::expect_same_value_and_grads;

torch::Tensor fused(const std::vector<torch::Tensor>& in) {
  return rms_norm(in[0], in[1], 1e-6);
}
torch::Tensor reference(const std::vector<torch::Tensor>& in) {
  return rms_norm_reference(in[0], in[1], 1e-6);
}

TEST(RmsNorm, MatchesReferenceWithGradsInDouble) {
  torch::manual_seed(0);
  auto x = torch::randn({5, 3, 16}, torch::kDouble);
  auto w = torch::randn({16}, torch::kDouble);
  expect_same_value_and_grads(fused, reference, {x, w}, 1e-12);
}

TEST(RmsNorm, Fp32CpuLoopMatchesReferenceWithGrads) {
  torch::manual_seed(1);
  auto x = torch::randn({37, 64}) * 3;
  auto w = torch::randn({64});
  expect_same_value_and_grads(fused, reference, {x, w}, 2e-5);
}

TEST(RmsNorm, NonContiguousFp32TakesComposedPath) {
  torch::manual_seed(2);
  auto x = torch::randn({64, 12}).t();  // [12, 64], not contiguous
  auto w = torch::randn({64});
  expect_same_value_and_grads(fused, reference, {x, w}, 2e-5);
}

TEST(RmsNorm, Bf16NormalisesInFp32AndCastsBeforeWeight) {
  torch::manual_seed(3);
  auto x = torch::randn({8, 32}).to(torch::kBFloat16);
  auto w = torch::randn({32}).to(torch::kBFloat16);
  torch::Tensor y = rms_norm(x, w, 1e-6);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  // Same rounding points as HF, so bit-identical to the composed formula.
  EXPECT_TRUE(torch::equal(y, rms_norm_reference(x, w, 1e-6)));
}

TEST(RmsNorm, StridedHeadViewsOfAFusedProjectionMatchReference) {
  torch::manual_seed(4);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    // q's heads inside a fused [T, q + k + v] output: rows strided by the fused width.
    auto fused_out = (torch::randn({5, 48}) * 2).to(dtype).requires_grad_();
    auto w = torch::randn({8}).to(dtype);
    auto heads = fused_out.narrow(1, 0, 32).view({5, 4, 8});
    ASSERT_FALSE(heads.is_contiguous());
    torch::Tensor got = rms_norm(heads, w, 1e-6);
    torch::Tensor want = rms_norm_reference(heads, w, 1e-6);
    ASSERT_EQ(got.sizes(), want.sizes());
    const double tol = dtype == torch::kFloat ? 2e-6 : 0.0;
    EXPECT_LE((got - want).abs().max().item<double>(), tol) << dtype;
    const torch::Tensor grad_got = torch::autograd::grad({got.sum()}, {fused_out})[0];
    const torch::Tensor grad_want = torch::autograd::grad({want.sum()}, {fused_out})[0];
    EXPECT_TRUE(torch::allclose(grad_got.to(torch::kFloat), grad_want.to(torch::kFloat), 2e-2,
                                2e-2))
        << dtype;
  }
}

TEST(RmsNorm, KnownValue) {
  auto x = torch::tensor({{3.0, 4.0}}, torch::kDouble);  // rms = sqrt(12.5)
  auto w = torch::tensor({1.0, 2.0}, torch::kDouble);
  auto y = rms_norm(x, w, 0.0);
  const double rms = std::sqrt(12.5);
  EXPECT_NEAR(y[0][0].item<double>(), 3.0 / rms, 1e-12);
  EXPECT_NEAR(y[0][1].item<double>(), 8.0 / rms, 1e-12);
}

}  // namespace
}  // namespace aspen::kernels
