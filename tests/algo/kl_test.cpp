#include "aspen/algo/kl.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "aspen/algo/kl_controller.h"
#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::scalar;

// logp = [-1, -2, -0.5], ref = [-1.5, -1, -0.5] -> d = logp - ref = [0.5, -1, 0].
torch::Tensor logp() {
  return dvec({-1, -2, -0.5});
}
torch::Tensor ref() {
  return dvec({-1.5, -1, -0.5});
}

TEST(KlPenalty, EstimatorsAtKnownValues) {
  expect_values(kl_penalty(logp(), ref(), KlEstimator::kK1), {0.5, -1, 0});
  expect_values(kl_penalty(logp(), ref(), KlEstimator::kAbs), {0.5, 1, 0});
  expect_values(kl_penalty(logp(), ref(), KlEstimator::kK2), {0.125, 0.5, 0});
  // k3 with x = ref - logp = [-0.5, 1, 0]: exp(x) - x - 1 =
  //   [e^-0.5 + 0.5 - 1, e - 2, 0] = [0.1065306597, 0.7182818285, 0].
  expect_values(kl_penalty(logp(), ref(), KlEstimator::kK3),
                {std::exp(-0.5) - 0.5, std::exp(1.0) - 2, 0}, 1e-12);
}

TEST(KlPenalty, K3IsClampedLikeVerl) {
  // x = 30 -> clamp 20 -> e^20 - 21 ~ 4.9e8 -> clamp 10; x = -30 -> -20 -> e^-20 + 19 -> 10.
  expect_values(kl_penalty(dvec({0, 0}), dvec({30, -30}), KlEstimator::kK3), {10, 10});
}

TEST(KlPenalty, K3GradientWithRespectToLogprobs) {
  // d/dlogp [exp(ref - logp) - (ref - logp) - 1] = 1 - exp(ref - logp):
  //   [1 - e^-0.5, 1 - e, 0] = [0.3934693403, -1.7182818285, 0].
  torch::Tensor lp = logp().requires_grad_(true);
  kl_penalty(lp, ref(), KlEstimator::kK3).sum().backward();
  expect_values(lp.grad(), {1 - std::exp(-0.5), 1 - std::exp(1.0), 0}, 1e-12);
}

TEST(KlPenalty, RefusesMismatchedShapes) {
  EXPECT_THROW(kl_penalty(dvec({1, 2}), dvec({1}), KlEstimator::kK1), Error);
}

TEST(KlLoss, AggregatesTheEstimate) {
  // lengths [1, 2]; k1 = [0.5, -1, 0]. token-mean: -0.5/3.
  // seq-mean-token-mean: (0.5 + (-1 + 0)/2)/2 = 0.
  PackedSeqs packed = PackedSeqs::from_lengths({1, 2});
  AggOptions agg;
  EXPECT_NEAR(scalar(kl_loss(logp(), ref(), packed, KlEstimator::kK1, agg)), -0.5 / 3, 1e-12);
  agg.mode = AggMode::kSeqMeanTokenMean;
  EXPECT_NEAR(scalar(kl_loss(logp(), ref(), packed, KlEstimator::kK1, agg)), 0.0, 1e-12);
}

TEST(EntropyLoss, AggregatesEntropy) {
  // entropy [1 | 2, 3], seq-mean-token-mean: (1 + 2.5)/2 = 1.75; token-mean 2.
  PackedSeqs packed = PackedSeqs::from_lengths({1, 2});
  AggOptions agg;
  EXPECT_NEAR(scalar(entropy_loss(dvec({1, 2, 3}), packed, agg)), 2.0, 1e-12);
  agg.mode = AggMode::kSeqMeanTokenMean;
  EXPECT_NEAR(scalar(entropy_loss(dvec({1, 2, 3}), packed, agg)), 1.75, 1e-12);
}

TEST(KlController, AdaptiveUpdateClipsProportionalError) {
  KlController c = KlController::adaptive(0.1, /*target_kl=*/6, /*horizon=*/10000);
  // kl 9: e = 9/6 - 1 = 0.5 -> clip 0.2; beta *= 1 + 0.2 * 1000/10000 = 1.02 -> 0.102.
  c.update(9, 1000);
  EXPECT_NEAR(c.value(), 0.102, 1e-15);
  // kl 3: e = -0.5 -> -0.2; beta *= 0.98 -> 0.09996.
  c.update(3, 1000);
  EXPECT_NEAR(c.value(), 0.09996, 1e-15);
  // kl 6.6: e = 0.1 (inside the clip); beta *= 1 + 0.1 * 500/10000 = 1.005.
  c.update(6.6, 500);
  EXPECT_NEAR(c.value(), 0.09996 * 1.005, 1e-15);
}

TEST(KlController, FixedNeverChangesAndInvalidSettingsThrow) {
  KlController c = KlController::fixed(0.05);
  c.update(100, 1000);
  EXPECT_EQ(c.value(), 0.05);
  EXPECT_FALSE(c.is_adaptive());
  EXPECT_THROW(KlController::fixed(-1), Error);
  EXPECT_THROW(KlController::adaptive(0.1, 0, 100), Error);
  EXPECT_THROW(KlController::adaptive(0.1, 6, 0), Error);
}

}  // namespace
}  // namespace aspen::algo
