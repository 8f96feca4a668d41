#include "aspen/kernels/swiglu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "grad_compare.h"

namespace aspen::kernels {
namespace {

TEST(Swiglu, MatchesReferenceWithGradsInDouble) {
  torch::manual_seed(0);
  auto gate = torch::randn({6, 40}, torch::kDouble) * 4;
  auto up = torch::randn({6, 40}, torch::kDouble);
  testing::expect_same_value_and_grads(
      [](const auto& in) { return swiglu(in[0], in[1]); },
      [](const auto& in) { return swiglu_reference(in[0], in[1]); }, {gate, up}, 1e-12);
}

TEST(Swiglu, KnownValue) {
  auto gate = torch::tensor({0.0, 1.0}, torch::kDouble);
  auto up = torch::tensor({5.0, 2.0}, torch::kDouble);
  auto out = swiglu(gate, up);
  EXPECT_DOUBLE_EQ(out[0].item<double>(), 0.0);
  EXPECT_NEAR(out[1].item<double>(), 2.0 / (1.0 + std::exp(-1.0)), 1e-15);
}

}  // namespace
}  // namespace aspen::kernels
