// Test helpers for algo: build fp64 tensors from literals and compare a tensor
// element-wise against hand-computed values.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace aspen::testing {

inline torch::Tensor dvec(const std::vector<double>& v) {
  return torch::tensor(v, torch::kDouble);
}

inline torch::Tensor ivec(const std::vector<int64_t>& v) {
  return torch::tensor(v, torch::kLong);
}

inline void expect_values(const torch::Tensor& actual, const std::vector<double>& expected,
                          double tol = 1e-9) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  torch::Tensor a = actual.detach().to(torch::kDouble).reshape({-1}).contiguous();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(a[static_cast<int64_t>(i)].item<double>(), expected[i], tol) << "index " << i;
  }
}

inline double scalar(const torch::Tensor& t) {
  return t.detach().item<double>();
}

}  // namespace aspen::testing
