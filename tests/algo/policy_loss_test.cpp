#include "aspen/algo/policy_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::scalar;

// Four tokens, old log-probs 0 so r_t = exp(logp_t) = [1, 1.5, 0.5, 4], A = [1, 1, -1, -1],
// clip 0.2 both sides, token-mean over N = 4:
//   t0: r = 1   inside          l = -1                 dl/dlogp = -A r / N = -0.25
//   t1: r = 1.5 A > 0, clipped  l1 = -1.5, l2 = -1.2 -> -1.2   grad 0
//   t2: r = 0.5 A < 0, clipped  l1 = 0.5,  l2 = 0.8  -> 0.8    grad 0
//   t3: r = 4   A < 0, unclipped l1 = 4,   l2 = 1.2  -> 4; dual clip c = 3 -> min(4, 3) = 3
//       grad 0 with dual clip; without it -A r / N = 4/4 = 1.
struct Batch {
  PackedSeqs packed = PackedSeqs::from_lengths({2, 2});
  torch::Tensor logp = dvec({0, std::log(1.5), std::log(0.5), std::log(4.0)}).requires_grad_(true);
  torch::Tensor old = torch::zeros({4}, torch::kDouble);
  torch::Tensor adv = dvec({1, 1, -1, -1});
  PolicyLossInputs inputs() const { return {logp, old, adv, {}}; }
};

PolicyLossOptions ppo(std::optional<double> c = 3.0) {
  PolicyLossOptions o;
  o.clip_ratio_c = c;
  return o;
}

TEST(PolicyLoss, PpoClipAndDualClipValuesGradientsAndMetrics) {
  Batch b;
  PolicyLossResult r = policy_loss(b.inputs(), b.packed, ppo());
  EXPECT_NEAR(scalar(r.loss), (-1 - 1.2 + 0.8 + 3) / 4, 1e-12);  // 0.4
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.25, 0, 0, 0}, 1e-12);
  EXPECT_NEAR(scalar(r.clip_frac), 0.5, 1e-12);        // t1, t2
  EXPECT_NEAR(scalar(r.dual_clip_frac), 0.25, 1e-12);  // t3
  EXPECT_NEAR(scalar(r.ratio_mean), (1 + 1.5 + 0.5 + 4) / 4, 1e-12);
  // k1 = mean(old - logp) = -(ln 1.5 + ln 0.5 + ln 4)/4 = -ln(3)/4.
  EXPECT_NEAR(scalar(r.approx_kl_k1), -std::log(3.0) / 4, 1e-12);
  // k3 = mean(r - 1 - ln r) = [0 + (0.5 - ln1.5) + (-0.5 - ln0.5) + (3 - ln4)]/4 = (3 - ln3)/4.
  EXPECT_NEAR(scalar(r.approx_kl_k3), (3 - std::log(3.0)) / 4, 1e-12);
  EXPECT_NEAR(scalar(r.correction_weight_mean), 1.0, 0);
  EXPECT_FALSE(r.clip_frac.requires_grad());
}

TEST(PolicyLoss, WithoutDualClipLargeRatioNegativeAdvantageKeepsGradient) {
  Batch b;
  PolicyLossResult r = policy_loss(b.inputs(), b.packed, ppo(std::nullopt));
  EXPECT_NEAR(scalar(r.loss), (-1 - 1.2 + 0.8 + 4) / 4, 1e-12);  // 0.65
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.25, 0, 0, 1.0}, 1e-12);
  EXPECT_EQ(scalar(r.dual_clip_frac), 0.0);
}

TEST(PolicyLoss, DapoClipHigherAndWiderLowerBound) {
  Batch b;
  PolicyLossOptions o = ppo();
  o.clip_ratio_high = 0.6;  // t1: r = 1.5 < 1.6 is now inside: l = -1.5, grad -1.5/4
  o.clip_ratio_low = 0.6;   // t2: r = 0.5 > 0.4 is now inside: l = 0.5, grad 0.5/4
  PolicyLossResult r = policy_loss(b.inputs(), b.packed, o);
  EXPECT_NEAR(scalar(r.loss), (-1 - 1.5 + 0.5 + 3) / 4, 1e-12);
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.25, -0.375, 0.125, 0}, 1e-12);
  EXPECT_NEAR(scalar(r.clip_frac), 0.0, 1e-12);
}

TEST(PolicyLoss, SeqMeanTokenMeanWeighsSequencesEqually) {
  // Same tokens, lengths [1, 3]: seq0 = -1; seq1 = (-1.2 + 0.8 + 3)/3 = 2.6/3.
  // loss = (-1 + 2.6/3) / 2; grad t0 = -A r / (L_0 * S) = -1 / (1 * 2) = -0.5.
  Batch b;
  b.packed = PackedSeqs::from_lengths({1, 3});
  PolicyLossOptions o = ppo();
  o.agg.mode = AggMode::kSeqMeanTokenMean;
  PolicyLossResult r = policy_loss(b.inputs(), b.packed, o);
  EXPECT_NEAR(scalar(r.loss), (-1 + 2.6 / 3) / 2, 1e-12);
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.5, 0, 0, 0}, 1e-12);
}

TEST(PolicyLoss, GspoUsesGeometricMeanSequenceRatio) {
  // old = 0. seq0 logp = [ln 1.21, 0] -> s0 = exp((ln 1.21 + 0)/2) = 1.1, A = +1 (inside clip).
  // seq1 logp = [ln 2] -> s1 = 2, A = +1 -> clipped: l = -1.2, grad 0.
  // seq-mean-token-mean: loss = (-1.1 + -1.2)/2 = -1.15.
  // Each token of seq0 has value s0 and d r_t / d logp_t = s0, so
  // grad = -A * s0 / (L_0 * S) = -1.1 / 4 = -0.275 for BOTH tokens (token PPO would clip t0).
  PackedSeqs packed = PackedSeqs::from_lengths({2, 1});
  torch::Tensor logp = dvec({std::log(1.21), 0, std::log(2.0)}).requires_grad_(true);
  PolicyLossOptions o;
  o.ratio = PolicyRatio::kSequence;
  o.agg.mode = AggMode::kSeqMeanTokenMean;
  PolicyLossResult r =
      policy_loss({logp, torch::zeros({3}, torch::kDouble), dvec({1, 1, 1}), {}}, packed, o);
  EXPECT_NEAR(scalar(r.loss), -1.15, 1e-12);
  EXPECT_NEAR(scalar(r.ratio_mean), (1.1 + 1.1 + 2) / 3, 1e-12);
  EXPECT_NEAR(scalar(r.clip_frac), 1.0 / 3, 1e-12);
  r.loss.backward();
  expect_values(logp.grad(), {-0.275, -0.275, 0}, 1e-12);
}

// Off-policy: behaviour log-probs give w = exp(old - beh) = [2, 2, 0.5, 3]
// (beh = [-ln2, -ln2, ln2, -ln3]); per-token losses (dual clip) are [-1, -1.2, 0.8, 3].
torch::Tensor behaviour() {
  return dvec({-std::log(2.0), -std::log(2.0), std::log(2.0), -std::log(3.0)});
}

TEST(PolicyLoss, DecoupledPpoWeightsByBehaviourToProximalAndDropsOverCap) {
  Batch b;
  PolicyLossInputs in = b.inputs();
  in.behaviour_logprobs = behaviour();
  PolicyLossOptions o = ppo();
  o.correction = OffPolicyCorrection::kDecoupled;
  // No cap: (-1*2 - 1.2*2 + 0.8*0.5 + 3*3)/4 = 5/4.
  EXPECT_NEAR(scalar(policy_loss(in, b.packed, o).loss), 1.25, 1e-12);
  // Cap 2.5 drops t3 (w = 3): (-2 - 2.4 + 0.4 + 0)/4 = -1; grad t0 = -0.25 * 2.
  o.correction_cap = 2.5;
  PolicyLossResult r = policy_loss(in, b.packed, o);
  EXPECT_NEAR(scalar(r.loss), -1.0, 1e-12);
  EXPECT_NEAR(scalar(r.correction_weight_mean), (2 + 2 + 0.5 + 0) / 4, 1e-12);
  EXPECT_NEAR(scalar(r.correction_capped_frac), 0.25, 1e-12);
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.5, 0, 0, 0}, 1e-12);
}

TEST(PolicyLoss, TruncatedImportanceSamplingClampsTheWeight) {
  Batch b;
  PolicyLossInputs in = b.inputs();
  in.behaviour_logprobs = behaviour();
  PolicyLossOptions o = ppo(std::nullopt);
  o.correction = OffPolicyCorrection::kTruncatedIS;
  o.correction_cap = 2.5;
  // w = [2, 2, 0.5, 2.5]; losses without dual clip [-1, -1.2, 0.8, 4]:
  // (-2 - 2.4 + 0.4 + 10)/4 = 1.5; grads [-0.25*2, 0, 0, 1*2.5].
  PolicyLossResult r = policy_loss(in, b.packed, o);
  EXPECT_NEAR(scalar(r.loss), 1.5, 1e-12);
  EXPECT_NEAR(scalar(r.correction_weight_mean), 7.0 / 4, 1e-12);
  r.loss.backward();
  expect_values(b.logp.grad(), {-0.5, 0, 0, 2.5}, 1e-12);
}

TEST(PolicyLoss, RejectsInvalidOptionsAndInputs) {
  Batch b;
  PolicyLossOptions o = ppo(1.0);  // dual clip must be > 1
  EXPECT_THROW(policy_loss(b.inputs(), b.packed, o), Error);
  o = ppo();
  o.correction = OffPolicyCorrection::kTruncatedIS;  // needs a cap
  EXPECT_THROW(policy_loss(b.inputs(), b.packed, o), Error);
  o.correction_cap = 2.0;  // needs behaviour log-probs
  EXPECT_THROW(policy_loss(b.inputs(), b.packed, o), Error);
  PolicyLossInputs bad = b.inputs();
  bad.advantages = dvec({1, 2});
  EXPECT_THROW(policy_loss(bad, b.packed, ppo()), Error);
}

TEST(PolicyLoss, MicroBatchesWithGlobalDenominatorsMatchOneBatchLossAndGradients) {
  // Lengths [3,1,4,2] split into micro-batches [3,1] (4 tokens) and [4,2] (6 tokens).
  torch::manual_seed(0);
  PackedSeqs whole = PackedSeqs::from_lengths({3, 1, 4, 2});
  PackedSeqs first = PackedSeqs::from_lengths({3, 1});
  PackedSeqs second = PackedSeqs::from_lengths({4, 2});
  torch::Tensor base = torch::randn({10}, torch::kDouble) * 0.3 - 1;
  torch::Tensor old = base + torch::randn({10}, torch::kDouble) * 0.3;
  torch::Tensor adv = torch::randn({10}, torch::kDouble);
  for (AggMode m : {AggMode::kTokenMean, AggMode::kSeqMeanTokenMean, AggMode::kSeqMeanTokenSum}) {
    PolicyLossOptions o = ppo();
    o.agg.mode = m;
    torch::Tensor lw = base.clone().requires_grad_(true);
    torch::Tensor one = policy_loss({lw, old, adv, {}}, whole, o).loss;
    one.backward();

    o.agg.global_tokens = 10;
    o.agg.global_seqs = 4;
    torch::Tensor lp = base.clone().requires_grad_(true);
    torch::Tensor a =
        policy_loss({lp.slice(0, 0, 4), old.slice(0, 0, 4), adv.slice(0, 0, 4), {}}, first, o).loss;
    torch::Tensor c =
        policy_loss({lp.slice(0, 4), old.slice(0, 4), adv.slice(0, 4), {}}, second, o).loss;
    a.backward();  // accumulate gradients micro-batch by micro-batch
    c.backward();
    EXPECT_NEAR(scalar(a) + scalar(c), scalar(one), 1e-12) << agg_mode_name(m);
    EXPECT_TRUE(torch::allclose(lp.grad(), lw.grad(), 0, 1e-12)) << agg_mode_name(m);
    EXPECT_GT(lw.grad().abs().sum().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace aspen::algo
