// Test helper: compares an op against its reference, value and gradients.
// Both are evaluated on the same leaf inputs with the same random upstream
// gradient; the max absolute differences are reported on failure.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace aspen::testing {

using TensorFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Leaves: fresh requires_grad copies of `inputs` for each evaluation.
inline std::vector<torch::Tensor> grads_of(const TensorFn& fn,
                                           const std::vector<torch::Tensor>& inputs,
                                           const torch::Tensor& upstream, torch::Tensor* out) {
  std::vector<torch::Tensor> leaves;
  for (const auto& x : inputs) leaves.push_back(x.detach().clone().requires_grad_(true));
  *out = fn(leaves);
  auto grads = torch::autograd::grad({*out}, leaves, {upstream.to(out->scalar_type())},
                                     /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true);
  return grads;
}

inline void expect_same_value_and_grads(const TensorFn& op, const TensorFn& reference,
                                        const std::vector<torch::Tensor>& inputs, double tol,
                                        uint64_t seed = 7) {
  torch::Tensor probe;
  {
    torch::NoGradGuard no_grad;
    probe = reference(inputs);
  }
  torch::manual_seed(seed);
  torch::Tensor upstream = torch::randn(probe.sizes(), torch::kDouble);
  torch::Tensor out_op;
  torch::Tensor out_ref;
  auto g_op = grads_of(op, inputs, upstream, &out_op);
  auto g_ref = grads_of(reference, inputs, upstream, &out_ref);
  ASSERT_EQ(out_op.sizes(), out_ref.sizes());
  EXPECT_EQ(out_op.scalar_type(), out_ref.scalar_type());
  EXPECT_LE(max_abs_diff(out_op, out_ref), tol) << "values differ";
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(g_op[i].defined(), g_ref[i].defined()) << "input " << i;
    if (!g_ref[i].defined()) continue;
    EXPECT_LE(max_abs_diff(g_op[i], g_ref[i]), tol) << "gradient of input " << i << " differs";
  }
}

}  // namespace aspen::testing
