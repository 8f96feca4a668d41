#include "aspen/algo/advantages.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::ivec;

// Six rows: group 5 = rows {0,1,2} scores [1,0,0]; group 2 = rows {3,4} scores [1,3];
// group 9 = row {5} score 0.7 (singleton). Lengths [1,2,1,1,2,1] -> T = 8.
class OutcomeAdvantageTest : public ::testing::Test {
 protected:
  torch::Tensor scores = dvec({1, 0, 0, 1, 3, 0.7});
  torch::Tensor groups = ivec({5, 5, 5, 2, 2, 9});
  PackedSeqs packed = PackedSeqs::from_lengths({1, 2, 1, 1, 2, 1});
};

TEST_F(OutcomeAdvantageTest, GrpoNormalisesByUnbiasedGroupStd) {
  // group 5: mean 1/3; deviations 2/3, -1/3, -1/3; sum sq 6/9; / (3-1) -> var 1/3.
  // group 2: mean 2; deviations -1, +1; var 2 / 1 = 2.
  // group 9: singleton -> mean 0, std 1 (verl) -> 0.7 / (1 + eps).
  const double eps = 1e-6, s5 = std::sqrt(1.0 / 3), s2 = std::sqrt(2.0);
  const double a0 = (2.0 / 3) / (s5 + eps), a1 = (-1.0 / 3) / (s5 + eps);
  const double a3 = -1 / (s2 + eps), a4 = 1 / (s2 + eps), a5 = 0.7 / (1 + eps);
  expect_values(grpo_advantages(scores, groups, packed), {a0, a1, a1, a1, a3, a4, a4, a5});
  // Sanity on the closed form with eps = 0: a0 = (2/3) * sqrt(3) = 1.1547005.
  GrpoOptions no_eps;
  no_eps.eps = 0;
  EXPECT_NEAR(grpo_advantages(scores, groups, packed, no_eps)[0].item<double>(), 1.1547005384,
              1e-9);
}

TEST_F(OutcomeAdvantageTest, DrGrpoOnlySubtractsGroupMean) {
  GrpoOptions o;
  o.norm_by_std = false;
  // [1-1/3, -1/3, -1/3, 1-2, 3-2, 0.7-0] broadcast to tokens.
  const double a = 2.0 / 3, b = -1.0 / 3;
  expect_values(grpo_advantages(scores, groups, packed, o), {a, b, b, b, -1, 1, 1, 0.7});
}

TEST_F(OutcomeAdvantageTest, RlooSubtractsMeanOfTheOthers) {
  // group 5: 1 - (0+0)/2 = 1; 0 - (1+0)/2 = -0.5 (twice). group 2: 1 - 3 = -2; 3 - 1 = 2.
  // singleton keeps its score.
  expect_values(rloo_advantages(scores, groups, packed), {1, -0.5, -0.5, -0.5, -2, 2, 2, 0.7});
}

TEST_F(OutcomeAdvantageTest, RejectsMisShapedInputs) {
  EXPECT_THROW(grpo_advantages(dvec({1, 2}), groups, packed), Error);
  EXPECT_THROW(rloo_advantages(scores, ivec({1, 2}), packed), Error);
  EXPECT_THROW(grpo_advantages(scores, scores, packed), Error);  // group ids not int64
}

TEST(ReinforcePpBaseline, SubtractsGroupMeanThenWhitensOverTokens) {
  // group 1 = rows {0,1,2} scores [1,0,0] (mean 1/3); group 2 = rows {3,4} scores [1,3] (mean 2).
  // Row values [2/3, -1/3, -1/3, -1, 1]; lengths [2,1,1,1,1] -> tokens
  // x = [2/3, 2/3, -1/3, -1/3, -1, 1]: mean 1/9; centred [5,5,-4,-4,-10,8]/9;
  // sum sq = (25+25+16+16+100+64)/81 = 246/81; unbiased var = 246/405.
  PackedSeqs packed = PackedSeqs::from_lengths({2, 1, 1, 1, 1});
  torch::Tensor adv =
      reinforce_pp_baseline_advantages(dvec({1, 0, 0, 1, 3}), ivec({1, 1, 1, 2, 2}), packed);
  const double k = 1.0 / 9 / std::sqrt(246.0 / 405 + 1e-8);
  expect_values(adv, {5 * k, 5 * k, -4 * k, -4 * k, -10 * k, 8 * k});
}

TEST(OutcomeTokenRewards, ScoreOnLastTokenMinusKlPenalty) {
  // lengths [2,1], scores [1,2], kl [0.1,0.2,0.3], coef 0.5:
  // r = [0 - 0.05, 1 - 0.1, 2 - 0.15]
  PackedSeqs packed = PackedSeqs::from_lengths({2, 1});
  expect_values(outcome_token_rewards(dvec({1, 2}), packed, dvec({0.1, 0.2, 0.3}), 0.5),
                {-0.05, 0.9, 1.85});
  expect_values(outcome_token_rewards(dvec({1, 2}), packed), {0, 1, 2});
}

TEST(ReinforcePp, DiscountedReturnsThenGlobalWhitening) {
  // r = [-0.05, 0.9 | 1.85], gamma 0.5: G = [-0.05 + 0.5*0.9, 0.9 | 1.85] = [0.4, 0.9, 1.85].
  // mean 1.05; centred [-0.65, -0.15, 0.8]; sum sq 1.085; unbiased var 0.5425.
  PackedSeqs packed = PackedSeqs::from_lengths({2, 1});
  AdvantagesAndReturns out = reinforce_pp_advantages(dvec({-0.05, 0.9, 1.85}), packed, 0.5);
  expect_values(out.returns, {0.4, 0.9, 1.85});
  const double k = 1.0 / std::sqrt(0.5425 + 1e-8);
  expect_values(out.advantages, {-0.65 * k, -0.15 * k, 0.8 * k});
}

TEST(Gae, ThreeStepExampleByHandAndNoLeakAcrossSequences) {
  // seq0: r = [0, 0, 1], V = [0.5, 0.6, 0.7]; seq1: r = [2], V = [1]. gamma 0.9, lambda 0.8.
  // seq0: delta2 = 1 + 0.9*0 - 0.7 = 0.3   (V after the last token is 0, NOT seq1's V = 1)
  //       delta1 = 0 + 0.9*0.7 - 0.6 = 0.03
  //       delta0 = 0 + 0.9*0.6 - 0.5 = 0.04
  //       A2 = 0.3; A1 = 0.03 + 0.72*0.3 = 0.246; A0 = 0.04 + 0.72*0.246 = 0.21712
  //       returns = A + V = [0.71712, 0.846, 1.0]
  // seq1: delta = 2 - 1 = 1 = A; return 2.
  PackedSeqs packed = PackedSeqs::from_lengths({3, 1});
  torch::Tensor r = dvec({0, 0, 1, 2}), v = dvec({0.5, 0.6, 0.7, 1});
  AdvantagesAndReturns raw = gae_advantages(r, v, packed, 0.9, 0.8, /*whiten_advantages=*/false);
  expect_values(raw.advantages, {0.21712, 0.246, 0.3, 1.0}, 1e-12);
  expect_values(raw.returns, {0.71712, 0.846, 1.0, 2.0}, 1e-12);

  AdvantagesAndReturns w = gae_advantages(r, v, packed, 0.9, 0.8);
  expect_values(w.returns, {0.71712, 0.846, 1.0, 2.0}, 1e-12);  // returns are never whitened
  EXPECT_NEAR(w.advantages.mean().item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(w.advantages.std().item<double>(), 1.0, 1e-6);
  // whiten: mean 1.76312/4 = 0.44078; centred [-0.22366, -0.19478, -0.14078, 0.55922];
  // sum sq 0.4205090608; unbiased var 0.1401696869.
  const double k = 1 / std::sqrt(0.4205090608 / 3 + 1e-8);
  expect_values(w.advantages, {-0.22366 * k, -0.19478 * k, -0.14078 * k, 0.55922 * k}, 1e-9);
}

TEST(Gae, LambdaOneGammaOneIsReturnToGoMinusValue) {
  // gamma = lambda = 1 telescopes: A_t = sum_{k>=t} r_k - V_t. r = [1, 2], V = [0.5, 0.25]:
  // A = [3 - 0.5, 2 - 0.25].
  PackedSeqs packed = PackedSeqs::from_lengths({2});
  AdvantagesAndReturns out = gae_advantages(dvec({1, 2}), dvec({0.5, 0.25}), packed, 1, 1, false);
  expect_values(out.advantages, {2.5, 1.75}, 1e-12);
  expect_values(out.returns, {3, 2}, 1e-12);
}

TEST(Whiten, ZeroMeanUnitUnbiasedVarianceAndSingleElement) {
  // x = [1, 3]: mean 2, unbiased var 2 -> [-1, 1] / sqrt(2 + 1e-8).
  const double k = 1 / std::sqrt(2 + 1e-8);
  expect_values(whiten(dvec({1, 3})), {-k, k});
  expect_values(whiten(dvec({5})), {0});
}

}  // namespace
}  // namespace aspen::algo
