#include "aspen/kernels/rms_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "grad_compare.h"

namespace aspen {
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

TEST(RmsNorm, KnownValue) {
  auto x = torch::tensor({{3.0, 4.0}}, torch::kDouble);  // rms = sqrt(12.5)
  auto w = torch::tensor({1.0, 2.0}, torch::kDouble);
  auto y = rms_norm(x, w, 0.0);
  const double rms = std::sqrt(12.5);
  EXPECT_NEAR(y[0][0].item<double>(), 3.0 / rms, 1e-12);
  EXPECT_NEAR(y[0][1].item<double>(), 8.0 / rms, 1e-12);
}

}  // namespace
}  // namespace aspen
