#include "aspen/kernels/logprob_chunk_cpu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

namespace aspen::kernels {
namespace {

// The chunk's logits as the fused loops see them: fp32, or rounded to bf16 (the GEMM's
// output dtype in the low-precision head).
torch::Tensor chunk_logits(int64_t tokens, int64_t n, torch::ScalarType dtype, int seed) {
  torch::manual_seed(seed);
  return (torch::randn({tokens, n}) * 4.0).to(dtype);
}

// Targets inside the chunk [begin, begin + n), before it and after it (rows another
// chunk or rank owns), and on both edges.
torch::Tensor mixed_targets(int64_t tokens, int64_t begin, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < tokens; ++t) {
    switch (t % 5) {
      case 0:
        ids.push_back(begin + (t * 7) % n);
        break;
      case 1:
        ids.push_back(begin - 1);
        break;
      case 2:
        ids.push_back(begin + n);
        break;
      case 3:
        ids.push_back(begin);
        break;
      default:
        ids.push_back(begin + n - 1);
        break;
    }
  }
  return torch::tensor(ids, torch::kLong);
}

struct Case {
  torch::ScalarType dtype;
  int64_t n;  // chunk width: a multiple of 16 and a ragged tail
  double temperature;
};

class LogprobChunkCpu : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!logprob_chunk_cpu_available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
};

// The online state after a previous chunk, then this one: against the same update in
// fp64 torch ops.
TEST_P(LogprobChunkCpu, StatsEqualTheComposedOnlineSoftmaxUpdate) {
  const Case c = GetParam();
  const int64_t tokens = 23, begin = 1000;
  const torch::Tensor logits = chunk_logits(tokens, c.n, c.dtype, 1);
  const torch::Tensor targets = mixed_targets(tokens, begin, c.n);
  // A state from an earlier chunk: a running max above and below this chunk's.
  torch::Tensor running_max = torch::linspace(-3.0, 12.0, tokens);
  torch::Tensor sum_exp = torch::linspace(0.5, 3.0, tokens);
  torch::Tensor sum_exp_logit = torch::linspace(-2.0, 2.0, tokens);
  torch::Tensor target_logit = torch::linspace(-1.0, 1.0, tokens);

  const torch::Tensor z = logits.to(torch::kDouble) / c.temperature;
  const torch::Tensor old_max = running_max.to(torch::kDouble);
  const torch::Tensor new_max = torch::maximum(old_max, std::get<0>(z.max(1)));
  const torch::Tensor rescale = torch::exp(old_max - new_max);
  const torch::Tensor e = torch::exp(z - new_max.unsqueeze(1));
  const torch::Tensor want_sum = sum_exp.to(torch::kDouble) * rescale + e.sum(1);
  const torch::Tensor want_sum_logit = sum_exp_logit.to(torch::kDouble) * rescale + (e * z).sum(1);
  const torch::Tensor local = targets - begin;
  const torch::Tensor in_chunk = (local >= 0) & (local < c.n);
  const torch::Tensor gathered = z.gather(1, local.clamp(0, c.n - 1).unsqueeze(1)).squeeze(1);
  const torch::Tensor want_target = target_logit.to(torch::kDouble) +
                                    torch::where(in_chunk, gathered, torch::zeros_like(gathered));

  logprob_chunk_stats_cpu(logits, c.temperature, targets, begin, /*with_entropy=*/true, running_max,
                          sum_exp, sum_exp_logit, target_logit);
  EXPECT_TRUE(torch::allclose(running_max.to(torch::kDouble), new_max, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(sum_exp.to(torch::kDouble), want_sum, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(sum_exp_logit.to(torch::kDouble), want_sum_logit, 1e-5, 1e-4));
  EXPECT_TRUE(torch::allclose(target_logit.to(torch::kDouble), want_target, 1e-6, 1e-6));
}

// The first chunk starts from m = -inf and s = 0: exp(-inf) must give 0, not NaN.
TEST_P(LogprobChunkCpu, FirstChunkFromMinusInfinityIsFinite) {
  const Case c = GetParam();
  const int64_t tokens = 9;
  const torch::Tensor logits = chunk_logits(tokens, c.n, c.dtype, 2);
  torch::Tensor running_max = torch::full({tokens}, -std::numeric_limits<float>::infinity());
  torch::Tensor sum_exp = torch::zeros({tokens}), sum_exp_logit = torch::zeros({tokens});
  torch::Tensor target_logit = torch::zeros({tokens});
  logprob_chunk_stats_cpu(logits, c.temperature, mixed_targets(tokens, 0, c.n), 0, false,
                          running_max, sum_exp, sum_exp_logit, target_logit);
  const torch::Tensor z = logits.to(torch::kDouble) / c.temperature;
  const torch::Tensor lse = torch::logsumexp(z, 1);
  EXPECT_TRUE(torch::allclose((running_max + sum_exp.log()).to(torch::kDouble), lse, 1e-6, 1e-5));
  EXPECT_TRUE(sum_exp_logit.eq(0).all().item<bool>()) << "no entropy asked: left as it was";
}

// d/dz of grad_lp * logprob + grad_ent * entropy, against autograd in fp64 over the
// whole vocabulary being this chunk (lse and E[z] of the chunk itself).
TEST_P(LogprobChunkCpu, GradEqualsAutogradOfLogprobAndEntropy) {
  const Case c = GetParam();
  const int64_t tokens = 19;
  const torch::Tensor logits = chunk_logits(tokens, c.n, c.dtype, 3);
  const torch::Tensor targets = mixed_targets(tokens, 0, c.n).clamp(0, c.n - 1);
  torch::manual_seed(4);
  const torch::Tensor grad_lp = torch::randn({tokens});
  const torch::Tensor grad_ent = torch::randn({tokens});

  torch::Tensor x = logits.to(torch::kDouble).requires_grad_(true);
  const torch::Tensor z = x / c.temperature;
  const torch::Tensor log_p = torch::log_softmax(z, 1);
  const torch::Tensor logprob = log_p.gather(1, targets.unsqueeze(1)).squeeze(1);
  const torch::Tensor entropy = -(log_p.exp() * log_p).sum(1);
  ((logprob * grad_lp.to(torch::kDouble)).sum() + (entropy * grad_ent.to(torch::kDouble)).sum())
      .backward();
  const torch::Tensor lse = torch::logsumexp(z, 1).detach().to(torch::kFloat);
  const torch::Tensor mean_logit = (log_p.exp() * z).sum(1).detach().to(torch::kFloat);

  for (torch::ScalarType out_dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::Tensor grad_z = torch::empty({tokens, c.n}, out_dtype);
    logprob_chunk_grad_cpu(logits, c.temperature, targets, 0, lse, grad_lp, grad_ent, mean_logit,
                           grad_z);
    // bf16 output: the rounding of grad_z itself (2^-8 relative).
    const double rtol = out_dtype == torch::kFloat ? 1e-5 : 8e-3;
    EXPECT_TRUE(torch::allclose(grad_z.to(torch::kDouble), x.grad(), rtol, 1e-6))
        << "out dtype " << out_dtype << ", max error "
        << (grad_z.to(torch::kDouble) - x.grad()).abs().max().item<double>();
  }
}

// Only one of the two outputs has a gradient: the other term is absent, not zero-filled
// garbage, and targets outside the chunk get no one-hot term.
TEST_P(LogprobChunkCpu, GradWithOneOutputAndTargetsElsewhere) {
  const Case c = GetParam();
  const int64_t tokens = 11, begin = 64;
  const torch::Tensor logits = chunk_logits(tokens, c.n, c.dtype, 5);
  const torch::Tensor targets = mixed_targets(tokens, begin, c.n);
  const torch::Tensor z = logits.to(torch::kDouble) / c.temperature;
  const torch::Tensor lse = (torch::logsumexp(z, 1) + 0.25).to(torch::kFloat);  // a wider vocab
  const torch::Tensor p = torch::exp(z - lse.to(torch::kDouble).unsqueeze(1));
  const torch::Tensor grad_lp = torch::linspace(-1.0, 2.0, tokens);
  const torch::Tensor local = targets - begin;
  const torch::Tensor onehot = torch::zeros({tokens, c.n}, torch::kDouble);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t l = local[t].item<int64_t>();
    if (l >= 0 && l < c.n) onehot[t][l] = 1.0;
  }
  const torch::Tensor want = (onehot - p) * grad_lp.to(torch::kDouble).unsqueeze(1) / c.temperature;
  torch::Tensor grad_z = torch::empty({tokens, c.n});
  logprob_chunk_grad_cpu(logits, c.temperature, targets, begin, lse, grad_lp, torch::Tensor(),
                         torch::Tensor(), grad_z);
  EXPECT_TRUE(torch::allclose(grad_z.to(torch::kDouble), want, 1e-5, 1e-6));

  const torch::Tensor grad_ent = torch::linspace(0.5, -0.5, tokens);
  const torch::Tensor mean_logit = torch::linspace(-0.2, 0.3, tokens);
  const torch::Tensor want_ent = p * (mean_logit.to(torch::kDouble).unsqueeze(1) - z) *
                                 grad_ent.to(torch::kDouble).unsqueeze(1) / c.temperature;
  logprob_chunk_grad_cpu(logits, c.temperature, targets, begin, lse, torch::Tensor(), grad_ent,
                         mean_logit, grad_z);
  EXPECT_TRUE(torch::allclose(grad_z.to(torch::kDouble), want_ent, 1e-5, 1e-6));
}

// The transposed layout ([n, T]) against the row layout on the same logits: the same
// online state after a previous chunk (to fp32 rounding: the max folds in 64 rows at a
// time there), and the gradient value for value, over token counts that fill whole
// 16-token vectors, leave a ragged last one, or fit in one, and chunks of more than one
// 64-row group.
TEST_P(LogprobChunkCpu, TransposedLayoutMatchesTheRowLayout) {
  const Case c = GetParam();
  for (int64_t tokens : {32, 19, 3}) {
    for (int64_t n : {c.n, c.n + 80}) {
      const int64_t begin = 16;
      const torch::Tensor logits = chunk_logits(tokens, n, c.dtype, 7);
      const torch::Tensor logits_t = logits.t().contiguous();
      const torch::Tensor targets = mixed_targets(tokens, begin, n);
      torch::manual_seed(8);
      // A previous chunk's state: finite max and sums for most tokens, -inf for one.
      const torch::Tensor max0 = torch::randn({tokens}) * 2;
      max0[0] = -std::numeric_limits<float>::infinity();
      const torch::Tensor sum0 = torch::rand({tokens}) + 0.5;
      sum0[0] = 0.0;
      const torch::Tensor logit0 = torch::randn({tokens});
      logit0[0] = 0.0;
      for (bool with_entropy : {false, true}) {
        torch::Tensor m = max0.clone(), s = sum0.clone(), a = logit0.clone(),
                      tl = torch::randn({tokens});
        torch::Tensor mt = max0.clone(), st = sum0.clone(), at = logit0.clone(), tlt = tl.clone();
        logprob_chunk_stats_cpu(logits, c.temperature, targets, begin, with_entropy, m, s, a, tl);
        logprob_chunk_stats_t_cpu(logits_t, c.temperature, targets, begin, with_entropy, mt, st, at,
                                  tlt);
        EXPECT_TRUE(torch::equal(mt, m)) << tokens << " x " << n;
        EXPECT_TRUE(torch::allclose(st, s, 1e-5, 0)) << tokens << " x " << n;
        EXPECT_TRUE(torch::allclose(at, a, 1e-5, 1e-6)) << tokens << " x " << n;
        EXPECT_TRUE(torch::equal(tlt, tl)) << tokens << " x " << n;
      }
      const torch::Tensor lse = torch::logsumexp(logits.to(torch::kFloat) / c.temperature, 1) + 0.5;
      const torch::Tensor grad_lp = torch::randn({tokens});
      const torch::Tensor grad_ent = torch::randn({tokens});
      const torch::Tensor mean_logit = torch::randn({tokens});
      for (torch::ScalarType out_dtype : {torch::kFloat, torch::kBFloat16}) {
        for (int terms = 0; terms < 3; ++terms) {  // both, grad_lp only, grad_ent only
          const torch::Tensor glp = terms == 2 ? torch::Tensor() : grad_lp;
          const torch::Tensor gent = terms == 1 ? torch::Tensor() : grad_ent;
          torch::Tensor want = torch::empty({tokens, n}, out_dtype);
          logprob_chunk_grad_cpu(logits, c.temperature, targets, begin, lse, glp, gent, mean_logit,
                                 want);
          torch::Tensor got = torch::full({n, tokens}, 123.0, out_dtype);
          logprob_chunk_grad_t_cpu(logits_t, c.temperature, targets, begin, lse, glp, gent,
                                   mean_logit, got);
          EXPECT_TRUE(torch::equal(got, want.t()))
              << tokens << " x " << n << ", " << out_dtype << ", terms " << terms;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DtypesWidthsTemperatures, LogprobChunkCpu,
                         ::testing::Values(Case{torch::kFloat, 64, 1.0},
                                           Case{torch::kFloat, 37, 0.7},
                                           Case{torch::kBFloat16, 48, 1.0},
                                           Case{torch::kBFloat16, 5, 1.3}));

TEST(LogprobChunkCpuContract, WrongShapesAndDtypesAreRefused) {
  if (!logprob_chunk_cpu_available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const torch::Tensor logits = torch::randn({4, 16});
  EXPECT_FALSE(logprob_chunk_cpu_applies(logits.to(torch::kDouble)));
  EXPECT_FALSE(logprob_chunk_cpu_applies(logits.t()));
  EXPECT_TRUE(logprob_chunk_cpu_applies(logits));
  torch::Tensor m = torch::zeros({3}), s = torch::zeros({4}), a = torch::zeros({4}),
                tl = torch::zeros({4});
  EXPECT_THROW(
      logprob_chunk_stats_cpu(logits, 1.0, torch::zeros({4}, torch::kLong), 0, false, m, s, a, tl),
      c10::Error);
  torch::Tensor grad_z = torch::empty({4, 15});
  EXPECT_THROW(
      logprob_chunk_grad_cpu(logits, 1.0, torch::zeros({4}, torch::kLong), 0, torch::zeros({4}),
                             torch::zeros({4}), torch::Tensor(), torch::Tensor(), grad_z),
      c10::Error);
}

}  // namespace
}  // namespace aspen::kernels
