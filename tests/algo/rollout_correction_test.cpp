#include "aspen/algo/rollout_correction.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "aspen/algo/policy_loss.h"
#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::scalar;

// Two sequences of two tokens; behaviour log-probs 0 and proximal log-probs ln rho, so
// the token ratios are rho = [1.5, 0.8, 3, 0.25]; the sequence ratios (products) are
// [1.2, 0.75] and their geometric means [sqrt 1.2, sqrt 0.75] = [1.0954, 0.8660].
struct CorrectionBatch {
  PackedSeqs packed = PackedSeqs::from_lengths({2, 2});
  torch::Tensor old = dvec({std::log(1.5), std::log(0.8), std::log(3.0), std::log(0.25)});
  torch::Tensor beh = torch::zeros({4}, torch::kDouble);
};

RolloutCorrectionOptions correction(RolloutIsLevel is, double c, RolloutRsLevel rs = RolloutRsLevel::kNone,
                              double lower = 0.5, double upper = 2.0) {
  RolloutCorrectionOptions o;
  o.is_level = is;
  o.is_threshold = c;
  o.rs_level = rs;
  o.rs_lower = lower;
  o.rs_upper = upper;
  return o;
}

TEST(RolloutCorrection, TokenTisTruncatesEachTokenRatioAtTheThreshold) {
  CorrectionBatch b;
  RolloutCorrection r = rollout_correction(b.old, b.beh, b.packed, correction(RolloutIsLevel::kToken, 2.0));
  expect_values(r.weights, {1.5, 0.8, 2.0, 0.25}, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.is_mean), (1.5 + 0.8 + 2.0 + 0.25) / 4, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.ratio_mean), (1.5 + 0.8 + 3.0 + 0.25) / 4, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.ratio_max), 3.0, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.ratio_min), 0.25, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.truncated_frac), 0.25, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.masked_frac), 0.0, 0);
  // k3 = mean(rho - 1 - ln rho).
  double k3 = 0;
  for (double rho : {1.5, 0.8, 3.0, 0.25}) k3 += (rho - 1 - std::log(rho)) / 4;
  EXPECT_NEAR(scalar(r.metrics.kl_k3), k3, 1e-12);
}

TEST(RolloutCorrection, SequenceTisUsesTheProductOfTheSequencesRatios) {
  CorrectionBatch b;
  RolloutCorrection r =
      rollout_correction(b.old, b.beh, b.packed, correction(RolloutIsLevel::kSequence, 1.0));
  // min(1.2, 1) = 1 for sequence 0, 0.75 for sequence 1.
  expect_values(r.weights, {1.0, 1.0, 0.75, 0.75}, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.truncated_frac), 0.5, 1e-12);
  r = rollout_correction(b.old, b.beh, b.packed, correction(RolloutIsLevel::kSequence, 5.0));
  expect_values(r.weights, {1.2, 1.2, 0.75, 0.75}, 1e-12);
}

TEST(RolloutCorrection, TokenRejectionMasksTokensOutsideTheBounds) {
  CorrectionBatch b;
  // rho 3 > 2 and 0.25 < 0.5 are rejected; no IS: kept tokens weigh 1.
  RolloutCorrection r = rollout_correction(
      b.old, b.beh, b.packed, correction(RolloutIsLevel::kNone, 2.0, RolloutRsLevel::kToken, 0.5, 2.0));
  expect_values(r.weights, {1, 1, 0, 0}, 0);
  EXPECT_NEAR(scalar(r.metrics.masked_frac), 0.5, 1e-12);
  EXPECT_NEAR(scalar(r.metrics.is_mean), 1.0, 0);
}

TEST(RolloutCorrection, SequenceAndGeometricRejectionDropWholeSequences) {
  CorrectionBatch b;
  // Products 1.2 (kept in [0.8, 1.5]) and 0.75 (rejected).
  RolloutCorrection seq = rollout_correction(
      b.old, b.beh, b.packed, correction(RolloutIsLevel::kNone, 2.0, RolloutRsLevel::kSequence, 0.8, 1.5));
  expect_values(seq.weights, {1, 1, 0, 0}, 0);
  // Geometric means 1.0954 (kept in [0.9, 1.1]) and 0.8660 (rejected) ...
  RolloutCorrection geo = rollout_correction(
      b.old, b.beh, b.packed, correction(RolloutIsLevel::kNone, 2.0, RolloutRsLevel::kGeometric, 0.9, 1.1));
  expect_values(geo.weights, {1, 1, 0, 0}, 0);
  // ... and with an upper bound of 1.09 the first is rejected too.
  geo = rollout_correction(b.old, b.beh, b.packed,
                           correction(RolloutIsLevel::kNone, 2.0, RolloutRsLevel::kGeometric, 0.9, 1.09));
  expect_values(geo.weights, {0, 0, 0, 0}, 0);
  EXPECT_NEAR(scalar(geo.metrics.masked_frac), 1.0, 0);
}

TEST(RolloutCorrection, BadThresholdsNameTheOption) {
  CorrectionBatch b;
  EXPECT_THROW(rollout_correction(b.old, b.beh, b.packed, correction(RolloutIsLevel::kToken, 0.0)),
               Error);
  EXPECT_THROW(rollout_correction(b.old, b.beh, b.packed,
                                  correction(RolloutIsLevel::kNone, 2, RolloutRsLevel::kToken, 3.0, 2.0)),
               Error);
}

// In the PPO loss: logp = old (ratio 1, inside the clip), A = 1, token-mean over 4, so
// l_t = -w_t and d loss / d logp_t = -w_t / 4. Token TIS at 2 with token rejection
// outside [0.5, 2]: w = [1.5, 0.8, 0, 0]; the rejected tokens' gradient is exactly 0.
TEST(RolloutCorrection, InThePolicyLossRejectedTokensGetExactlyZeroGradient) {
  CorrectionBatch b;
  torch::Tensor logp = b.old.clone().requires_grad_(true);
  PolicyLossOptions o;
  o.correction = OffPolicyCorrection::kRolloutCorrection;
  o.rollout = correction(RolloutIsLevel::kToken, 2.0, RolloutRsLevel::kToken, 0.5, 2.0);
  PolicyLossResult r = policy_loss({logp, b.old, dvec({1, 1, 1, 1}), b.beh}, b.packed, o);
  EXPECT_NEAR(scalar(r.loss), -(1.5 + 0.8) / 4, 1e-12);
  r.loss.backward();
  expect_values(logp.grad(), {-1.5 / 4, -0.8 / 4, 0, 0}, 1e-12);
  EXPECT_EQ(logp.grad()[2].item<double>(), 0.0);
  EXPECT_EQ(logp.grad()[3].item<double>(), 0.0);
  EXPECT_NEAR(scalar(r.correction_weight_mean), (1.5 + 0.8) / 4, 1e-12);
  EXPECT_NEAR(scalar(r.correction_capped_frac), 0.5, 1e-12);  // t2 truncated and rejected, t3
  EXPECT_NEAR(scalar(r.rollout.truncated_frac), 0.25, 1e-12);
  EXPECT_NEAR(scalar(r.rollout.masked_frac), 0.5, 1e-12);
  EXPECT_THROW(policy_loss({logp, b.old, dvec({1, 1, 1, 1}), {}}, b.packed, o), Error);
}

}  // namespace
}  // namespace aspen::algo
