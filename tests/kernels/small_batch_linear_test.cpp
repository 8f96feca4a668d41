#include "aspen/kernels/small_batch_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace aspen::kernels {
namespace {

bool cpu_runs_kernel(torch::ScalarType dtype) {
  const bool f = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return dtype == torch::kFloat ? f : f && __builtin_cpu_supports("avx512bf16");
}

// y against the exact product of the same (rounded) inputs in fp64: one rounding of
// the result to the dtype (half an ulp: 2^-9 relative for bf16) plus the fp32
// accumulator's error.
void expect_close_to_exact(const torch::Tensor& y, const torch::Tensor& x,
                           const torch::Tensor& w, const torch::Tensor& b,
                           const std::string& what) {
  torch::Tensor exact = torch::matmul(x.to(torch::kDouble), w.to(torch::kDouble).t());
  if (b.defined()) exact = exact + b.to(torch::kDouble);
  const double rel = y.scalar_type() == torch::kBFloat16 ? std::ldexp(1.0, -8) : 1e-6;
  const torch::Tensor bound = exact.abs() * rel + 1e-4;
  EXPECT_TRUE(((y.to(torch::kDouble) - exact).abs() <= bound).all().item<bool>()) << what;
}

TEST(SmallBatchLinear, MatchesTheExactProductAtEveryBatchSizeWithTailsInBothDims) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    // N = 1003: 4-row (2-row past 4 inputs) blocks plus a tail, and more than one thread's chunk; K = 72: whole
    // vectors plus a masked tail in both dtypes.
    const torch::Tensor w = torch::randn({1003, 72}).to(dtype);
    const torch::Tensor b = torch::randn({1003}).to(dtype);
    const int64_t max_rows = small_batch_max_rows(dtype);
    for (int64_t m = 1; m <= max_rows + 1; ++m) {
      const torch::Tensor x = torch::randn({m, 72}).to(dtype);
      for (bool with_bias : {false, true}) {
        const torch::Tensor bias = with_bias ? b : torch::Tensor();
        const std::string what = std::string(c10::toString(dtype)) + " m=" + std::to_string(m) +
                                 (with_bias ? " with bias" : "");
        EXPECT_EQ(small_batch_kernel_applies(x, w, bias),
                  m <= max_rows && cpu_runs_kernel(dtype))
            << what;
        const torch::Tensor y = small_batch_linear(x, w, bias);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{m, 1003})) << what;
        EXPECT_EQ(y.scalar_type(), dtype);
        expect_close_to_exact(y, x, w, bias, what);
      }
    }
  }
}

TEST(SmallBatchLinear, ReadsRowsOfAStridedInput) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const torch::Tensor wide = torch::randn({3, 100});
  const torch::Tensor x = wide.narrow(1, 10, 64);  // rows 100 apart
  const torch::Tensor w = torch::randn({20, 64});
  EXPECT_EQ(small_batch_kernel_applies(x, w), cpu_runs_kernel(torch::kFloat));
  expect_close_to_exact(small_batch_linear(x, w), x, w, {}, "strided x");
}

TEST(SmallBatchLinear, WithAGradientWantedItIsTorchLinear) {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({8, 16}, torch::requires_grad());
  const torch::Tensor x = torch::randn({1, 16});
  EXPECT_FALSE(small_batch_kernel_applies(x, w));
  torch::Tensor y = small_batch_linear(x, w);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(torch::allclose(w.grad(), x.expand({8, 16})));
  // Other dtypes and shapes go to torch as well, with its result.
  const torch::Tensor xd = torch::randn({2, 16}, torch::kDouble);
  const torch::Tensor wd = torch::randn({8, 16}, torch::kDouble);
  EXPECT_FALSE(small_batch_kernel_applies(xd, wd));
  EXPECT_TRUE(torch::equal(small_batch_linear(xd, wd), torch::nn::functional::linear(xd, wd)));
}

// A weight past the caches, as the vocabulary head is (16,400 x 1,024 fp32: 64 MB), at
// one row: the kernel takes it, with torch's values to fp32 (bf16: bf16) rounding.
TEST(SmallBatchLinear, OneRowAgainstAHeadSizedWeightMatchesTorch) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const torch::Tensor w = torch::randn({16400, 1024}) * 0.05;
  const torch::Tensor x = torch::randn({1, 1024});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const torch::Tensor wd = w.to(dtype), xd = x.to(dtype);
    EXPECT_EQ(small_batch_kernel_applies(xd, wd), cpu_runs_kernel(dtype));
    const torch::Tensor want = torch::matmul(xd.to(torch::kFloat), wd.to(torch::kFloat).t());
    const torch::Tensor got = small_batch_linear(xd, wd).to(torch::kFloat);
    const double tolerance = dtype == torch::kFloat ? 1e-4 : 2e-2;  // bf16: the output's rounding
    EXPECT_LE((got - want).abs().max().item<double>(), tolerance) << dtype;
  }
}

}  // namespace
}  // namespace aspen::kernels
