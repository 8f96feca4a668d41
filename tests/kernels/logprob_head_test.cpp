#include "aspen/kernels/logprob_chunk_cpu.h"
#include "aspen/kernels/logprob_chunks.h"
#include "aspen/kernels/logprob_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <torch/torch.h>

#include "grad_compare.h"

namespace aspen::kernels {
namespace {

using testing::expect_same_value_and_grads;
using testing::max_abs_diff;

// Values and gradients of [logprobs; entropy] (or logprobs alone) as one tensor,
// so one random upstream gradient exercises both backward terms at once.
testing::TensorFn head(bool chunked, const torch::Tensor& targets, LogprobHeadOptions options) {
  return [=](const std::vector<torch::Tensor>& in) {
    TokenLogprobs out = chunked ? chunked_logprobs(in[0], in[1], targets, options)
                                : logprobs_reference(in[0], in[1], targets, options);
    return options.with_entropy ? torch::cat({out.logprobs, out.entropy}) : out.logprobs;
  };
}

class LogprobHeadChunks : public ::testing::TestWithParam<int64_t> {};

TEST_P(LogprobHeadChunks, MatchesFullLogSoftmaxWithGradsInDouble) {
  torch::manual_seed(0);
  const int64_t tokens = 9, hidden = 12, vocab = 37;  // 37 is prime: no chunk size divides it
  auto h = torch::randn({tokens, hidden}, torch::kDouble);
  auto w = torch::randn({vocab, hidden}, torch::kDouble);
  auto targets = torch::randint(0, vocab, {tokens}, torch::kLong);
  targets[0] = 0;
  targets[1] = vocab - 1;  // first and last vocabulary rows
  for (bool entropy : {false, true}) {
    for (double temperature : {1.0, 0.7}) {
      LogprobHeadOptions options;
      options.chunk_size = GetParam();
      options.with_entropy = entropy;
      options.temperature = temperature;
      SCOPED_TRACE(::testing::Message() << "entropy=" << entropy << " T=" << temperature);
      expect_same_value_and_grads(head(true, targets, options), head(false, targets, options),
                                  {h, w}, 1e-10);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, LogprobHeadChunks, ::testing::Values(1, 5, 8, 36, 37, 100));

TEST(LogprobHead, EntropyGradientAloneMatchesReference) {
  torch::manual_seed(1);
  auto h = torch::randn({4, 6}, torch::kDouble);
  auto w = torch::randn({11, 6}, torch::kDouble);
  auto targets = torch::randint(0, 11, {4}, torch::kLong);
  LogprobHeadOptions options;
  options.chunk_size = 3;
  options.with_entropy = true;
  auto entropy_of = [&](bool chunked) {
    return [=](const std::vector<torch::Tensor>& in) {
      return chunked ? chunked_logprobs(in[0], in[1], targets, options).entropy
                     : logprobs_reference(in[0], in[1], targets, options).entropy;
    };
  };
  expect_same_value_and_grads(entropy_of(true), entropy_of(false), {h, w}, 1e-10);
}

TEST(LogprobHead, Fp32StableForLargeLogits) {
  torch::manual_seed(2);
  auto h = torch::randn({16, 32});
  auto w = torch::randn({1000, 32}) * 20;  // logits in the hundreds: naive exp overflows
  auto targets = torch::randint(0, 1000, {16}, torch::kLong);
  LogprobHeadOptions options;
  options.chunk_size = 128;
  options.with_entropy = true;
  TokenLogprobs got = chunked_logprobs(h, w, targets, options);
  TokenLogprobs want =
      logprobs_reference(h.to(torch::kDouble), w.to(torch::kDouble), targets, options);
  EXPECT_EQ(got.logprobs.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(got.logprobs).all().item<bool>());
  EXPECT_LE(max_abs_diff(got.logprobs, want.logprobs), 1e-3);
  EXPECT_LE(max_abs_diff(got.entropy, want.entropy), 1e-3);
}

TEST(LogprobHead, GradientOnlyForInputsThatNeedIt) {
  torch::manual_seed(3);
  auto h = torch::randn({5, 8}, torch::kDouble).requires_grad_(true);
  auto w = torch::randn({20, 8}, torch::kDouble);  // frozen head
  auto targets = torch::randint(0, 20, {5}, torch::kLong);
  LogprobHeadOptions options;
  options.chunk_size = 6;
  chunked_logprobs(h, w, targets, options).logprobs.sum().backward();
  auto h_ref = h.detach().clone().requires_grad_(true);
  logprobs_reference(h_ref, w, targets, options).logprobs.sum().backward();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_LE(max_abs_diff(h.grad(), h_ref.grad()), 1e-12);
}

TEST(LogprobHead, Bf16InputsGiveFp32OutputsAndBf16Grads) {
  torch::manual_seed(4);
  auto h = torch::randn({6, 16}).to(torch::kBFloat16).requires_grad_(true);
  auto w = (torch::randn({50, 16}) * 0.3).to(torch::kBFloat16).requires_grad_(true);
  auto targets = torch::randint(0, 50, {6}, torch::kLong);
  LogprobHeadOptions options;
  options.chunk_size = 16;
  TokenLogprobs got = chunked_logprobs(h, w, targets, options);
  EXPECT_EQ(got.logprobs.scalar_type(), torch::kFloat);
  // Same bf16 inputs, upcast: the head itself adds no bf16 rounding.
  TokenLogprobs want = logprobs_reference(h.detach().to(torch::kFloat),
                                          w.detach().to(torch::kFloat), targets, options);
  EXPECT_LE(max_abs_diff(got.logprobs, want.logprobs), 1e-5);
  got.logprobs.sum().backward();
  EXPECT_EQ(h.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(w.grad().scalar_type(), torch::kBFloat16);
}

// gemm_in_input_dtype: bf16 GEMMs, softmax statistics in fp32. Each logit is rounded to
// bf16 (relative error <= 2^-9), so a log-prob moves by at most 2 * max|z| * 2^-9 from
// the fp32 head's on the same inputs; and it equals eager autocast's
// log_softmax(float(h @ w^T)) up to fp32 rounding. Gradients keep their dtypes and
// follow the fp32 head's within bf16's precision.
TEST(LogprobHead, Bf16GemmsStayWithinTheLogitsRoundingOfTheFp32Head) {
  torch::manual_seed(6);
  auto h = torch::randn({12, 32}).to(torch::kBFloat16).requires_grad_(true);
  auto w = (torch::randn({300, 32}) * 0.5).to(torch::kBFloat16).requires_grad_(true);
  auto targets = torch::randint(0, 300, {12}, torch::kLong);
  LogprobHeadOptions fp32_head;
  fp32_head.chunk_size = 64;
  fp32_head.with_entropy = true;
  LogprobHeadOptions bf16_head = fp32_head;
  bf16_head.gemm_in_input_dtype = true;

  TokenLogprobs got = chunked_logprobs(h, w, targets, bf16_head);
  EXPECT_EQ(got.logprobs.scalar_type(), torch::kFloat);
  const torch::Tensor logits = torch::matmul(h.detach().to(torch::kFloat), w.detach().to(torch::kFloat).t());
  const double bound = 2.0 * logits.abs().max().item<double>() * std::ldexp(1.0, -9);
  TokenLogprobs exact = chunked_logprobs(h.detach(), w.detach(), targets, fp32_head);
  EXPECT_LE(max_abs_diff(got.logprobs, exact.logprobs), bound);
  EXPECT_GT(max_abs_diff(got.logprobs, exact.logprobs), 0.0) << "the GEMMs did not run in bf16";
  const torch::Tensor autocast =
      torch::log_softmax(torch::matmul(h.detach(), w.detach().t()).to(torch::kFloat), -1)
          .gather(1, targets.unsqueeze(1))
          .squeeze(1);
  EXPECT_LE(max_abs_diff(got.logprobs, autocast), 1e-4);

  (got.logprobs.sum() + got.entropy.sum()).backward();
  EXPECT_EQ(h.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(w.grad().scalar_type(), torch::kBFloat16);
  auto h32 = h.detach().clone().requires_grad_(true);
  auto w32 = w.detach().clone().requires_grad_(true);
  TokenLogprobs fp32 = chunked_logprobs(h32, w32, targets, fp32_head);
  (fp32.logprobs.sum() + fp32.entropy.sum()).backward();
  const auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>() /
           b.to(torch::kFloat).abs().max().item<double>();
  };
  EXPECT_LE(rel(h.grad(), h32.grad()), 3e-2);
  EXPECT_LE(rel(w.grad(), w32.grad()), 3e-2);
}

// saved_logits_max_bytes: a backward from the forward's kept logits equals one that
// recomputes them (the same GEMM outputs), for fp32 and for bf16 GEMMs, with entropy
// and a temperature; under the budget nothing is kept and the results are the same.
TEST(LogprobHead, KeptLogitsGiveTheGradientsOfRecomputedOnes) {
  for (const bool bf16 : {false, true}) {
    torch::manual_seed(8);
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    const torch::Tensor h0 = torch::randn({21, 32}).to(dtype);
    const torch::Tensor w0 = (torch::randn({203, 32}) * 0.5).to(dtype);
    const torch::Tensor targets = torch::randint(0, 203, {21}, torch::kLong);
    LogprobHeadOptions options;
    options.chunk_size = 64;  // 3 full chunks and a ragged one
    options.with_entropy = true;
    options.temperature = 0.8;
    options.gemm_in_input_dtype = bf16;
    const auto run = [&](int64_t max_bytes) {
      LogprobHeadOptions o = options;
      o.saved_logits_max_bytes = max_bytes;
      auto h = h0.clone().requires_grad_(true);
      auto w = w0.clone().requires_grad_(true);
      TokenLogprobs out = chunked_logprobs(h, w, targets, o);
      (out.logprobs * torch::linspace(-1.0, 1.0, 21) + out.entropy * 0.3).sum().backward();
      return std::vector<torch::Tensor>{out.logprobs, out.entropy, h.grad(), w.grad()};
    };
    if (logprob_chunk_cpu_available()) {  // the fused CPU path: what keeps logits
      const torch::Tensor h_gemm = head_gemm_input(h0, bf16);
      const int64_t bytes = 21 * 203 * (bf16 ? 2 : 4);
      EXPECT_TRUE(keep_head_logits(h_gemm, h0.clone().requires_grad_(true), w0, bytes));
      EXPECT_FALSE(keep_head_logits(h_gemm, h0.clone().requires_grad_(true), w0, bytes - 1));
      EXPECT_FALSE(keep_head_logits(h_gemm, h0, w0, bytes)) << "no gradient: nothing to keep for";
    }
    const auto recomputed = run(0);
    const auto kept = run(int64_t{1} << 30);
    const auto too_small = run(21 * 203 * (bf16 ? 2 : 4) - 1);
    for (size_t i = 0; i < recomputed.size(); ++i) {
      EXPECT_LE(max_abs_diff(kept[i], recomputed[i]), 1e-6) << "bf16 " << bf16 << ", output " << i;
      EXPECT_LE(max_abs_diff(too_small[i], recomputed[i]), 1e-6) << "bf16 " << bf16;
    }
  }
}

TEST(LogprobHead, ProbabilitiesOfAllTargetsSumToOne) {
  torch::manual_seed(5);
  const int64_t vocab = 23;
  auto h = torch::randn({1, 4}).repeat({vocab, 1});
  auto w = torch::randn({vocab, 4});
  LogprobHeadOptions options;
  options.chunk_size = 7;
  auto lp = chunked_logprobs(h, w, torch::arange(vocab, torch::kLong), options).logprobs;
  EXPECT_NEAR(lp.exp().sum().item<float>(), 1.0f, 1e-5);
}

}  // namespace
}  // namespace aspen::kernels
