// The loss mask (packed.h, issue #35) in every advantage estimator: a multi-turn
// trajectory is estimated as its compacted sequence of model tokens, environment
// tokens get 0, and whitening statistics ignore them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "aspen/algo/advantages.h"
#include "aspen/algo/packed.h"
#include "aspen/util/error.h"
#include "expect_tensor.h"
#include "loss_mask_fixture.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::ivec;

// kLengths, kMask (loss_mask_fixture.h): rows of 5, 4, 3 tokens; row 0 is model,
// model, env, env, model; row 1 model, env, model, model; row 2 model, model, env.
using masked_testing::kLengths;
using masked_testing::kMask;
using masked_testing::masked_packing;
using masked_testing::spoil;

// Reference GAE on plain vectors: one row of model tokens, V = 0 past the end.
std::vector<double> reference_gae(const std::vector<double>& r, const std::vector<double>& v,
                                  double gamma, double lambda) {
  std::vector<double> adv(r.size());
  double running = 0.0;
  for (size_t i = r.size(); i-- > 0;) {
    const double next_v = i + 1 < r.size() ? v[i + 1] : 0.0;
    running = r[i] + gamma * next_v - v[i] + gamma * lambda * running;
    adv[i] = running;
  }
  return adv;
}

TEST(LossMaskGae, EqualsGaeOfTheCompactedSequenceAndIsZeroAtEnvironmentTokens) {
  const PackedSeqs packed = masked_packing();
  const torch::Tensor r = dvec({0.1, -0.2, 0.3, 0.4, 1.0, 0.0, 0.5, -0.1, 2.0, 0.2, 0.7, 0.9});
  const torch::Tensor v = dvec({0.5, 0.4, 9.0, 9.0, 0.2, 0.3, 9.0, 0.6, 0.1, 0.8, 0.7, 9.0});
  const double gamma = 0.9, lambda = 0.8;
  const AdvantagesAndReturns masked = gae_advantages(r, v, packed, gamma, lambda, false);
  // By hand, row by row over the model tokens only.
  const std::vector<double> a0 = reference_gae({0.1, -0.2, 1.0}, {0.5, 0.4, 0.2}, gamma, lambda);
  const std::vector<double> a1 = reference_gae({0.0, -0.1, 2.0}, {0.3, 0.6, 0.1}, gamma, lambda);
  const std::vector<double> a2 = reference_gae({0.2, 0.7}, {0.8, 0.7}, gamma, lambda);
  expect_values(masked.advantages,
                {a0[0], a0[1], 0, 0, a0[2], a1[0], 0, a1[1], a1[2], a2[0], a2[1], 0}, 1e-12);
  expect_values(masked.returns, {a0[0] + 0.5, a0[1] + 0.4, 0, 0, a0[2] + 0.2, a1[0] + 0.3, 0,
                                 a1[1] + 0.6, a1[2] + 0.1, a2[0] + 0.8, a2[1] + 0.7, 0},
                1e-12);
  // Whitened: the compacted sequence's whitened advantages, scattered back.
  const AdvantagesAndReturns whitened = gae_advantages(r, v, packed, gamma, lambda, true);
  const AdvantagesAndReturns compact = gae_advantages(
      packed.compact(r), packed.compact(v), packed.compacted(), gamma, lambda, true);
  EXPECT_TRUE(torch::allclose(packed.compact(whitened.advantages), compact.advantages, 0, 1e-12));
  EXPECT_TRUE(torch::equal(spoil(whitened.advantages, 0.0), whitened.advantages));
  // Rewards and values at environment tokens are never read.
  const AdvantagesAndReturns spoiled =
      gae_advantages(spoil(r, 1e30), spoil(v, std::nan("")), packed, gamma, lambda, true);
  EXPECT_TRUE(torch::equal(spoiled.advantages, whitened.advantages));
  EXPECT_TRUE(torch::equal(spoiled.returns, whitened.returns));
}

TEST(LossMaskReinforcePp, ReturnsSkipEnvironmentTokensAndWhiteningIgnoresThem) {
  const PackedSeqs packed = masked_packing();
  const torch::Tensor scores = dvec({1.0, -1.0, 0.5});
  const torch::Tensor kl = dvec({0.1, 0.2, 5, 5, 0.3, 0.1, 5, 0.2, 0.1, 0.4, 0.1, 5});
  const torch::Tensor rewards = outcome_token_rewards(scores, packed, kl, 0.5);
  // The score lands on each row's last MODEL token; KL only at model tokens.
  expect_values(rewards, {-0.05, -0.1, 0, 0, 1.0 - 0.15, -0.05, 0, -0.1, -1.0 - 0.05, -0.2,
                          0.5 - 0.05, 0},
                1e-12);
  const double gamma = 0.9;
  const AdvantagesAndReturns out = reinforce_pp_advantages(rewards, packed, gamma);
  const double g0_2 = 0.85, g0_1 = -0.1 + gamma * g0_2, g0_0 = -0.05 + gamma * g0_1;
  const double g1_2 = -1.05, g1_1 = -0.1 + gamma * g1_2, g1_0 = -0.05 + gamma * g1_1;
  const double g2_1 = 0.45, g2_0 = -0.2 + gamma * g2_1;
  expect_values(out.returns, {g0_0, g0_1, 0, 0, g0_2, g1_0, 0, g1_1, g1_2, g2_0, g2_1, 0}, 1e-12);
  // Whitened over the 8 model tokens: mean 0 and unbiased variance 1 there, 0 elsewhere.
  const torch::Tensor model = packed.compact(out.advantages);
  EXPECT_NEAR(model.mean().item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(model.var().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(torch::equal(spoil(out.advantages, 0.0), out.advantages));
  EXPECT_TRUE(torch::allclose(model, whiten(packed.compact(out.returns)), 0, 1e-12));
}

TEST(LossMaskOutcomeEstimators, ModelTokensGetTheRowAdvantageEnvironmentTokensZero) {
  const PackedSeqs plain = PackedSeqs::from_lengths(kLengths);
  const PackedSeqs packed = masked_packing();
  const torch::Tensor scores = dvec({1.0, 0.0, 0.5});
  const torch::Tensor groups = ivec({0, 0, 0});
  const torch::Tensor mask = dvec(kMask);
  EXPECT_TRUE(torch::equal(grpo_advantages(scores, groups, packed),
                           grpo_advantages(scores, groups, plain) * mask));
  EXPECT_TRUE(torch::equal(rloo_advantages(scores, groups, packed),
                           rloo_advantages(scores, groups, plain) * mask));
  // REINFORCE++-baseline whitens over the 8 model tokens: 3 + 3 + 2 of them.
  const torch::Tensor baseline = reinforce_pp_baseline_advantages(scores, groups, packed);
  // s - mean = [0.5, -0.5, 0] on 3, 3 and 2 model tokens: mean 0, var 6 * 0.25 / 7.
  const double scale = 1.0 / std::sqrt(1.5 / 7.0 + 1e-8);
  expect_values(baseline, {0.5 * scale, 0.5 * scale, 0, 0, 0.5 * scale, -0.5 * scale, 0,
                           -0.5 * scale, -0.5 * scale, 0, 0, 0},
                1e-12);
}

TEST(LossMaskOutcomeEstimators, ARowWithoutModelTokensHasNowhereForItsScore) {
  const PackedSeqs packed =
      PackedSeqs::from_lengths({2, 1}).with_loss_mask(dvec({1, 1, 0}));
  EXPECT_THROW(outcome_token_rewards(dvec({1.0, 0.0}), packed), Error);
}

}  // namespace
}  // namespace aspen::algo
