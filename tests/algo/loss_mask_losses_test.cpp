// The loss mask (packed.h, issue #35) in every loss and aggregation: environment
// tokens of a multi-turn trajectory add nothing to a loss, a gradient or a metric,
// whatever their columns hold, and a masked batch equals its compacted batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "aspen/algo/aggregate.h"
#include "aspen/algo/kl.h"
#include "aspen/algo/packed.h"
#include "aspen/algo/policy_loss.h"
#include "aspen/algo/value_loss.h"
#include "aspen/util/error.h"
#include "expect_tensor.h"
#include "loss_mask_fixture.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::scalar;

// kLengths, kMask (loss_mask_fixture.h): rows of 5, 4, 3 tokens; row 0 is model,
// model, env, env, model; row 1 model, env, model, model; row 2 model, model, env.
using masked_testing::kLengths;
using masked_testing::kMask;
using masked_testing::masked_packing;
using masked_testing::spoil;

struct Columns {
  torch::Tensor logp, old, adv, beh;
};

Columns random_columns(uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t n = static_cast<int64_t>(kMask.size());
  return {-torch::rand({n}, torch::kDouble) * 2 - 0.1,
          -torch::rand({n}, torch::kDouble) * 2 - 0.1, torch::randn({n}, torch::kDouble),
          -torch::rand({n}, torch::kDouble) * 2 - 0.1};
}

struct LossAndGrad {
  torch::Tensor loss, grad;
  PolicyLossResult result;
};

LossAndGrad run_policy(const Columns& c, const PackedSeqs& packed, const PolicyLossOptions& o) {
  torch::Tensor logp = c.logp.clone().requires_grad_(true);
  PolicyLossResult r = policy_loss({logp, c.old, c.adv, c.beh}, packed, o);
  r.loss.backward();
  return {r.loss.detach(), logp.grad().clone(), r};
}

// Every policy-loss variant and aggregation mode the trainer can be configured with.
std::vector<std::pair<std::string, PolicyLossOptions>> policy_variants() {
  std::vector<std::pair<std::string, PolicyLossOptions>> out;
  const std::vector<AggMode> modes = {AggMode::kTokenMean, AggMode::kSeqMeanTokenMean,
                                      AggMode::kSeqMeanTokenSum, AggMode::kSeqMeanTokenSumNorm};
  for (AggMode mode : modes) {
    PolicyLossOptions base;
    base.agg.mode = mode;
    base.agg.norm_length = 8.0;
    const std::string m = agg_mode_name(mode);
    out.push_back({"ppo " + m, base});
    PolicyLossOptions dual = base;
    dual.clip_ratio_c = 3.0;
    dual.clip_ratio_high = 0.28;  // DAPO clip-higher
    out.push_back({"dual clip, clip-higher " + m, dual});
    PolicyLossOptions gspo = base;
    gspo.ratio = PolicyRatio::kSequence;
    out.push_back({"gspo " + m, gspo});
    PolicyLossOptions decoupled = base;
    decoupled.correction = OffPolicyCorrection::kDecoupled;
    decoupled.correction_cap = 1.5;
    out.push_back({"decoupled " + m, decoupled});
    PolicyLossOptions tis = base;
    tis.correction = OffPolicyCorrection::kTruncatedIS;
    tis.correction_cap = 1.2;
    out.push_back({"tis " + m, tis});
    for (RolloutIsLevel is : {RolloutIsLevel::kToken, RolloutIsLevel::kSequence}) {
      for (RolloutRsLevel rs : {RolloutRsLevel::kToken, RolloutRsLevel::kSequence,
                                RolloutRsLevel::kGeometric}) {
        PolicyLossOptions rc = base;
        rc.correction = OffPolicyCorrection::kRolloutCorrection;
        rc.rollout.is_level = is;
        rc.rollout.is_threshold = 1.5;
        rc.rollout.rs_level = rs;
        rc.rollout.rs_lower = 0.3;
        rc.rollout.rs_upper = 3.0;
        out.push_back({"rollout correction " + std::to_string(static_cast<int>(is)) + "/" +
                           std::to_string(static_cast<int>(rs)) + " " + m,
                       rc});
      }
    }
  }
  return out;
}

TEST(LossMaskPolicyLoss, GarbageAtEnvironmentTokensChangesNeitherLossNorGradientNorMetrics) {
  const PackedSeqs packed = masked_packing();
  const Columns clean = random_columns(7);
  for (double garbage : {std::numeric_limits<double>::quiet_NaN(), 1e30, -1e30}) {
    Columns spoiled{spoil(clean.logp, -3.7), spoil(clean.old, garbage),
                    spoil(clean.adv, garbage), spoil(clean.beh, garbage)};
    for (const auto& [name, options] : policy_variants()) {
      SCOPED_TRACE(name + " garbage " + std::to_string(garbage));
      const LossAndGrad a = run_policy(clean, packed, options);
      const LossAndGrad b = run_policy(spoiled, packed, options);
      ASSERT_TRUE(std::isfinite(scalar(a.loss)));
      EXPECT_TRUE(torch::equal(a.loss, b.loss));
      EXPECT_TRUE(torch::equal(a.grad, b.grad));
      // The gradient at every environment token is exactly zero.
      EXPECT_TRUE(torch::equal(spoil(a.grad, 0.0), a.grad));
      for (const auto& [x, y] :
           {std::pair{a.result.clip_frac, b.result.clip_frac},
            {a.result.approx_kl_k3, b.result.approx_kl_k3},
            {a.result.ratio_mean, b.result.ratio_mean},
            {a.result.correction_weight_mean, b.result.correction_weight_mean},
            {a.result.correction_capped_frac, b.result.correction_capped_frac}}) {
        EXPECT_TRUE(torch::equal(x, y));
      }
      if (a.result.rollout.is_mean.defined()) {
        EXPECT_TRUE(torch::equal(a.result.rollout.ratio_max, b.result.rollout.ratio_max));
        EXPECT_TRUE(torch::equal(a.result.rollout.ratio_min, b.result.rollout.ratio_min));
        EXPECT_TRUE(torch::equal(a.result.rollout.kl_k3, b.result.rollout.kl_k3));
        EXPECT_TRUE(torch::equal(a.result.rollout.masked_frac, b.result.rollout.masked_frac));
      }
    }
  }
}

TEST(LossMaskPolicyLoss, MaskedBatchEqualsItsCompactedBatch) {
  const PackedSeqs packed = masked_packing();
  const PackedSeqs& compact = packed.compacted();
  const Columns c = random_columns(11);
  const Columns cc{packed.compact(c.logp), packed.compact(c.old), packed.compact(c.adv),
                   packed.compact(c.beh)};
  for (const auto& [name, options] : policy_variants()) {
    SCOPED_TRACE(name);
    const LossAndGrad masked = run_policy(c, packed, options);
    const LossAndGrad reference = run_policy(cc, compact, options);
    EXPECT_NEAR(scalar(masked.loss), scalar(reference.loss), 1e-12);
    EXPECT_TRUE(torch::allclose(packed.compact(masked.grad), reference.grad, 0, 1e-12));
    EXPECT_NEAR(scalar(masked.result.clip_frac), scalar(reference.result.clip_frac), 1e-12);
    EXPECT_NEAR(scalar(masked.result.approx_kl_k1), scalar(reference.result.approx_kl_k1), 1e-12);
    if (masked.result.rollout.is_mean.defined()) {
      EXPECT_NEAR(scalar(masked.result.rollout.ratio_max),
                  scalar(reference.result.rollout.ratio_max), 1e-12);
      EXPECT_NEAR(scalar(masked.result.rollout.masked_frac),
                  scalar(reference.result.rollout.masked_frac), 1e-12);
    }
  }
}

TEST(LossMaskPolicyLoss, AllOnesMaskGivesTheUnmaskedResult) {
  const PackedSeqs plain = PackedSeqs::from_lengths(kLengths);
  const PackedSeqs ones =
      plain.with_loss_mask(torch::ones({static_cast<int64_t>(kMask.size())}, torch::kDouble));
  const Columns c = random_columns(3);
  for (const auto& [name, options] : policy_variants()) {
    SCOPED_TRACE(name);
    const LossAndGrad a = run_policy(c, plain, options);
    const LossAndGrad b = run_policy(c, ones, options);
    EXPECT_NEAR(scalar(a.loss), scalar(b.loss), 1e-13);
    EXPECT_TRUE(torch::allclose(a.grad, b.grad, 0, 1e-13));
  }
}

// l = [1..12] over the rows of kLengths with kMask: model tokens per row
//   row 0: 1, 2, 5 (3 tokens, sum 8)  row 1: 6, 8, 9 (3, sum 23)  row 2: 10, 11 (2, sum 21)
TEST(LossMaskAggregate, ModesHandComputedOverModelTokens) {
  const PackedSeqs packed = masked_packing();
  const torch::Tensor l = torch::arange(1, 13, torch::kDouble);
  AggOptions o;
  o.mode = AggMode::kTokenMean;
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 52.0 / 8.0, 1e-12);
  o.mode = AggMode::kSeqMeanTokenMean;
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), (8.0 / 3 + 23.0 / 3 + 21.0 / 2) / 3, 1e-12);
  o.mode = AggMode::kSeqMeanTokenSum;
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 52.0 / 3, 1e-12);
  o.mode = AggMode::kSeqMeanTokenSumNorm;
  o.norm_length = 4.0;
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 52.0 / (3 * 4.0), 1e-12);
  // Global denominators stay the caller's (the trainer passes model-token counts).
  o.mode = AggMode::kTokenMean;
  o.global_tokens = 13.0;
  EXPECT_NEAR(scalar(aggregate(l, packed, o)), 52.0 / 13.0, 1e-12);
  EXPECT_NEAR(scalar(token_mean_metric(l, packed)), 52.0 / 8.0, 1e-12);
  EXPECT_EQ(packed.num_loss_tokens(), 8);
  expect_values(packed.loss_lengths(), {3, 3, 2});
}

TEST(LossMaskValueLoss, CriticTrainsOnModelTokensOnly) {
  const PackedSeqs packed = masked_packing();
  torch::manual_seed(5);
  const int64_t n = static_cast<int64_t>(kMask.size());
  const torch::Tensor v = torch::randn({n}, torch::kDouble);
  const torch::Tensor old = torch::randn({n}, torch::kDouble);
  const torch::Tensor ret = torch::randn({n}, torch::kDouble);
  AggOptions agg;
  auto run = [&](const torch::Tensor& o, const torch::Tensor& r) {
    torch::Tensor values = v.clone().requires_grad_(true);
    ValueLossResult result = value_loss(values, o, r, packed, 0.2, agg);
    result.loss.backward();
    return std::make_pair(result.loss.detach(), values.grad().clone());
  };
  const auto [loss, grad] = run(old, ret);
  const auto [spoiled_loss, spoiled_grad] =
      run(spoil(old, std::nan("")), spoil(ret, 1e30));
  EXPECT_TRUE(torch::equal(loss, spoiled_loss));
  EXPECT_TRUE(torch::equal(grad, spoiled_grad));
  EXPECT_TRUE(torch::equal(spoil(grad, 0.0), grad));
  // The compacted batch's value loss.
  torch::Tensor cv = packed.compact(v).requires_grad_(true);
  ValueLossResult reference = value_loss(cv, packed.compact(old), packed.compact(ret),
                                         packed.compacted(), 0.2, agg);
  reference.loss.backward();
  EXPECT_NEAR(scalar(loss), scalar(reference.loss), 1e-12);
  EXPECT_TRUE(torch::allclose(packed.compact(grad), cv.grad(), 0, 1e-12));
}

TEST(LossMaskKlAndEntropy, EnvironmentTokensAddNothing) {
  const PackedSeqs packed = masked_packing();
  const Columns c = random_columns(9);
  AggOptions agg;
  agg.mode = AggMode::kSeqMeanTokenMean;
  for (KlEstimator e : {KlEstimator::kK1, KlEstimator::kAbs, KlEstimator::kK2, KlEstimator::kK3}) {
    auto run = [&](const torch::Tensor& ref) {
      torch::Tensor logp = c.logp.clone().requires_grad_(true);
      torch::Tensor loss = kl_loss(logp, ref, packed, e, agg);
      loss.backward();
      return std::make_pair(loss.detach(), logp.grad().clone());
    };
    const auto [loss, grad] = run(c.old);
    const auto [spoiled, spoiled_grad] = run(spoil(c.old, std::nan("")));
    EXPECT_TRUE(torch::equal(loss, spoiled));
    EXPECT_TRUE(torch::equal(grad, spoiled_grad));
    EXPECT_TRUE(torch::equal(spoil(grad, 0.0), grad));
    EXPECT_NEAR(scalar(loss),
                scalar(kl_loss(packed.compact(c.logp), packed.compact(c.old), packed.compacted(),
                               e, agg)),
                1e-12);
  }
  torch::Tensor entropy = spoil(torch::full({12}, 2.0, torch::kDouble), 50.0).requires_grad_(true);
  torch::Tensor loss = entropy_loss(entropy, packed, agg);
  loss.backward();
  EXPECT_NEAR(scalar(loss), 2.0, 1e-12);
  EXPECT_TRUE(torch::equal(spoil(entropy.grad(), 0.0), entropy.grad()));
}

TEST(LossMaskPacking, RejectsMasksThatAreNotZeroOrOnePerToken) {
  const PackedSeqs packed = PackedSeqs::from_lengths(kLengths);
  EXPECT_THROW(packed.with_loss_mask(torch::ones({11})), Error);
  torch::Tensor half = torch::ones({12});
  half[3] = 0.5;
  EXPECT_THROW(packed.with_loss_mask(half), Error);
  EXPECT_FALSE(packed.with_loss_mask(torch::Tensor()).has_loss_mask());
  // An undefined mask leaves the layout unmasked: compact/expand are the identity.
  const torch::Tensor x = torch::arange(12, torch::kDouble);
  EXPECT_TRUE(torch::equal(packed.compact(x), x));
  EXPECT_EQ(packed.num_loss_tokens(), 12);
}

}  // namespace
}  // namespace aspen::algo
