// The advantages of a whole batch, pinned against hand-computed values: group
// baselines per token, the KL penalty in the reward and the controller's step, and
// inputs that disagree refused naming the input.
#include "aspen/pipeline/batch_advantages.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

void expect_tokens(const torch::Tensor& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[static_cast<int64_t>(i)].item<double>(), expected[i], 1e-5) << "token " << i;
  }
}

TEST(BatchAdvantages, GrpoNormalizesEachGroupsScoresAndBroadcastsThemOverTheRowsTokens) {
  AlgorithmSection algorithm;
  algorithm.name = AlgorithmName::kGrpo;
  KlController kl = KlController::fixed(0.0);
  AdvantageInputs inputs;
  // Group 7: scores 1 and 0 (mean 0.5, sample std 0.7071); group 3: equal scores.
  inputs.lengths = {2, 1, 1, 3};
  inputs.group_ids = {7, 7, 3, 3};
  inputs.scores = {1.0, 0.0, 0.5, 0.5};
  const BatchAdvantages out = batch_advantages(algorithm, kl, inputs);
  const double a = 0.5 / std::sqrt(0.5);
  expect_tokens(out.advantages, {a, a, -a, 0, 0, 0, 0});
  EXPECT_FALSE(out.returns.defined());
  EXPECT_EQ(out.stats.rows, 4);
  EXPECT_EQ(out.stats.kl_in_reward, 0.0);
}

TEST(BatchAdvantages, KlInTheRewardShapesEachRowsScoreAndStepsTheController) {
  AlgorithmSection algorithm;
  algorithm.name = AlgorithmName::kDrGrpo;  // score - group mean, no std
  algorithm.kl_in_reward = true;
  algorithm.kl_estimator = KlEstimator::kK1;  // old - ref per token
  KlController kl = KlController::adaptive(0.1, /*target_kl=*/0.01, /*horizon=*/1000);
  AdvantageInputs inputs;
  inputs.lengths = {2, 1};
  inputs.group_ids = {0, 0};
  inputs.scores = {1.0, 0.0};
  inputs.old_logprobs = torch::tensor({-1.0, -2.0, -3.0});
  inputs.ref_logprobs = torch::tensor({-1.2, -2.4, -4.0});  // KL 0.2, 0.4, 1.0
  const BatchAdvantages out = batch_advantages(algorithm, kl, inputs);
  // Shaped: 1 - 0.1 * 0.6 = 0.94 and 0 - 0.1 * 1.0 = -0.1; mean 0.42.
  expect_tokens(out.advantages, {0.52, 0.52, -0.52});
  EXPECT_NEAR(out.stats.kl_in_reward, 1.6 / 3, 1e-6);
  EXPECT_EQ(out.stats.kl_coef, 0.1);
  EXPECT_NE(kl.value(), 0.1) << "the adaptive controller steps on the batch's KL";
}

TEST(BatchAdvantages, PpoNeedsValuesAndReturnsTheirTargets) {
  AlgorithmSection algorithm;
  algorithm.name = AlgorithmName::kPpo;
  algorithm.gamma = 1.0;
  algorithm.lambda = 1.0;
  KlController kl = KlController::fixed(0.0);
  AdvantageInputs inputs;
  inputs.lengths = {2};
  inputs.group_ids = {0};
  inputs.scores = {1.0};
  EXPECT_THROW(batch_advantages(algorithm, kl, inputs), Error) << "no values";
  inputs.values = torch::tensor({0.25, 0.5});
  const BatchAdvantages out = batch_advantages(algorithm, kl, inputs);
  // gamma = lambda = 1: every token's return is the row's score.
  expect_tokens(out.returns, {1.0, 1.0});
  ASSERT_EQ(out.advantages.numel(), 2);
}

TEST(BatchAdvantages, InputsThatDisagreeAreRefusedNamingTheInput) {
  AlgorithmSection algorithm;
  KlController kl = KlController::fixed(0.0);
  AdvantageInputs inputs;
  inputs.lengths = {2, 1};
  inputs.group_ids = {0};
  inputs.scores = {1.0, 0.0};
  try {
    batch_advantages(algorithm, kl, inputs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("advantage inputs"), std::string::npos) << e.what();
  }
  algorithm.kl_in_reward = true;
  inputs.group_ids = {0, 0};
  inputs.old_logprobs = torch::zeros({3});
  inputs.ref_logprobs = torch::zeros({2});  // one token short
  try {
    batch_advantages(algorithm, kl, inputs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ref_logprobs"), std::string::npos) << e.what();
  }
}

TEST(BatchAdvantages, AnEmptyBatchHasNoAdvantages) {
  AlgorithmSection algorithm;
  KlController kl = KlController::fixed(0.0);
  const BatchAdvantages out = batch_advantages(algorithm, kl, AdvantageInputs{});
  EXPECT_EQ(out.advantages.numel(), 0);
  EXPECT_EQ(out.stats.rows, 0);
}

// Multi-turn trajectories: the loss mask keeps environment tokens out of every
// estimator - KL in the reward, its mean, the score's token, GAE and its whitening.
TEST(BatchAdvantages, LossMaskKeepsEnvironmentTokensOutOfKlAndGae) {
  AlgorithmSection algorithm;
  algorithm.name = AlgorithmName::kPpo;
  algorithm.gamma = 1.0;
  algorithm.lambda = 1.0;
  algorithm.kl_in_reward = true;
  algorithm.kl_estimator = KlEstimator::kK1;
  KlController kl = KlController::fixed(0.5);
  AdvantageInputs inputs;
  // Row 0: model, env, model, env (it ends with an observation); row 1: model.
  inputs.lengths = {4, 1};
  inputs.group_ids = {0, 1};
  inputs.scores = {1.0, 2.0};
  inputs.old_logprobs = torch::tensor({-1.0, 0.0, -1.0, 0.0, -1.0});
  inputs.ref_logprobs = torch::tensor({-1.2, -9.0, -1.4, -9.0, -1.0});  // KL 0.2, 0.4, 0
  inputs.values = torch::tensor({0.5, 7.0, 0.25, 7.0, 1.0});
  inputs.loss_mask = torch::tensor({1.0, 0.0, 1.0, 0.0, 1.0});
  const BatchAdvantages out = batch_advantages(algorithm, kl, inputs);
  // Token rewards on model tokens: -0.1, 1 - 0.2 = 0.8 | 2. With gamma = lambda = 1,
  // A_t = (reward-to-go over the row's model tokens) - V_t and returns = reward-to-go.
  expect_tokens(out.returns, {0.7, 0, 0.8, 0, 2.0});
  // Advantages 0.2, 0.55, 1.0, whitened over those three model tokens only.
  const double mean = 1.75 / 3;
  const std::vector<double> a = {0.2 - mean, 0.55 - mean, 1.0 - mean};
  const double scale = 1.0 / std::sqrt((a[0] * a[0] + a[1] * a[1] + a[2] * a[2]) / 2 + 1e-8);
  expect_tokens(out.advantages, {a[0] * scale, 0, a[1] * scale, 0, a[2] * scale});
  EXPECT_NEAR(out.stats.kl_in_reward, 0.6 / 3, 1e-6);
}

}  // namespace
}  // namespace aspen::pipeline
