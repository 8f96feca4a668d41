#include "aspen/rollout/sampler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "aspen/util/error.h"

namespace aspen::rollout {
namespace {

// A 4-token distribution with probabilities chosen so every filter's effect is
// easy to compute by hand.
const std::vector<double> kProbs = {0.5, 0.3, 0.15, 0.05};

torch::Tensor logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return torch::tensor(logits).unsqueeze(0);
}

// Draws `n` tokens with seeds 0..n-1 and returns the empirical frequencies.
std::vector<double> frequencies(const SamplingParams& params, int n = 20000) {
  const torch::Tensor logits = logits_of(kProbs);
  std::vector<double> counts(kProbs.size(), 0.0);
  for (int i = 0; i < n; ++i) {
    SamplingRow row{&params, static_cast<uint64_t>(i), 0, {}};
    counts[sample_tokens(logits, {row})[0].token] += 1.0 / n;
  }
  return counts;
}

void expect_distribution(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    // 20000 draws: the standard error is at most 0.0036; allow ~4 sigma.
    EXPECT_NEAR(actual[i], expected[i], 0.015) << "token " << i;
  }
}

TEST(Sampler, GreedyPicksArgmaxWithPolicyLogprob) {
  SamplingParams params;
  params.temperature = 0.0;
  SamplingRow row{&params, 7, 0, {}};
  const SampledToken t = sample_tokens(logits_of(kProbs), {row})[0];
  EXPECT_EQ(t.token, 0);
  EXPECT_NEAR(t.policy_logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(t.sampling_logprob, 0.0f);
}

TEST(Sampler, TemperatureOneMatchesDistribution) {
  SamplingParams params;
  expect_distribution(frequencies(params), kProbs);
}

TEST(Sampler, TemperatureTwoFlattensAsSquareRoot) {
  SamplingParams params;
  params.temperature = 2.0;
  std::vector<double> expected;
  double total = 0;
  for (double p : kProbs) total += std::sqrt(p);
  for (double p : kProbs) expected.push_back(std::sqrt(p) / total);
  expect_distribution(frequencies(params), expected);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingParams params;
  params.top_k = 3;
  expect_distribution(frequencies(params), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0});
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
  SamplingParams params;
  params.top_p = 0.7;  // 0.5 < 0.7 <= 0.8: tokens 0 and 1
  expect_distribution(frequencies(params), {0.625, 0.375, 0.0, 0.0});
}

// On a real vocabulary size the cut is found by selection, not by sorting: every drawn
// token must lie in the shortest most-likely prefix reaching p (computed here by a full
// sort), and its sampling log-prob is renormalised over exactly that prefix.
TEST(Sampler, TopPOnALargeVocabularyKeepsExactlyTheSortedPrefix) {
  constexpr int64_t kVocab = 20000;
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({1, kVocab}) * 3.0;
  const float* data = logits.data_ptr<float>();
  std::vector<int64_t> order(kVocab);
  for (int64_t i = 0; i < kVocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return data[a] > data[b] || (data[a] == data[b] && a < b);
  });
  const float max_logit = data[order[0]];
  double total = 0.0;
  for (int64_t i = 0; i < kVocab; ++i) total += std::exp(static_cast<double>(data[i] - max_logit));
  for (const double top_p : {0.3, 0.9, 0.999}) {
    std::map<int64_t, double> kept;  // id -> weight
    double mass = 0.0;
    for (int64_t id : order) {
      const double w = std::exp(static_cast<double>(data[id] - max_logit));
      kept[id] = w;
      mass += w;
      if (mass >= top_p * total) break;
    }
    SamplingParams params;
    params.top_p = top_p;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      const SampledToken t = sample_tokens(logits, {SamplingRow{&params, seed, 0, {}}})[0];
      ASSERT_TRUE(kept.count(t.token)) << "top_p " << top_p << " drew " << t.token;
      EXPECT_NEAR(t.sampling_logprob, std::log(kept.at(t.token) / mass), 1e-4);
    }
  }
}

TEST(Sampler, TopPBreaksTiesByTokenId) {
  // All equal: the most likely half is the lower half of the ids.
  const torch::Tensor logits = torch::zeros({1, 1000});
  SamplingParams params;
  params.top_p = 0.5;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const SampledToken t = sample_tokens(logits, {SamplingRow{&params, seed, 0, {}}})[0];
    EXPECT_LT(t.token, 500);
    EXPECT_NEAR(t.sampling_logprob, std::log(1.0 / 500), 1e-5);
  }
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfMax) {
  SamplingParams params;
  params.min_p = 0.25;  // keep p >= 0.125: tokens 0, 1, 2
  expect_distribution(frequencies(params), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0});
}

TEST(Sampler, SamplingLogprobIsRenormalisedAndPolicyLogprobIsRaw) {
  SamplingParams params;
  params.top_p = 0.7;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingRow row{&params, seed, 3, {}};
    const SampledToken t = sample_tokens(logits_of(kProbs), {row})[0];
    const double kept = t.token == 0 ? 0.625 : 0.375;
    EXPECT_NEAR(t.sampling_logprob, std::log(kept), 1e-5);
    EXPECT_NEAR(t.policy_logprob, std::log(kProbs[t.token]), 1e-5);
  }
}

TEST(Sampler, SuppressedTokensAreNeverDrawn) {
  SamplingParams params;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    SamplingRow row{&params, seed, 0, {0, 2}};
    const TokenId token = sample_tokens(logits_of(kProbs), {row})[0].token;
    EXPECT_TRUE(token == 1 || token == 3);
  }
}

TEST(Sampler, SameSeedSameTokenWhateverElseSharesTheBatch) {
  SamplingParams params;
  params.temperature = 1.3;
  torch::manual_seed(0);
  const torch::Tensor row_logits = torch::randn({1, 1000});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SamplingRow alone{&params, seed, 5, {}};
    const TokenId expected = sample_tokens(row_logits, {alone})[0].token;
    const torch::Tensor batch =
        torch::cat({torch::randn({2, 1000}), row_logits, torch::randn({1, 1000})});
    SamplingRow other{&params, seed + 1000, 5, {}};
    const auto sampled = sample_tokens(batch, {other, other, alone, other});
    EXPECT_EQ(sampled[2].token, expected);
  }
}

TEST(SamplingParams, RejectsOutOfRangeValues) {
  SamplingParams params;
  params.top_p = 0.0;
  EXPECT_THROW(params.validate("request 0"), std::exception);
  params = SamplingParams{};
  params.min_tokens = params.max_tokens + 1;
  EXPECT_THROW(params.validate("request 0"), std::exception);
  params = SamplingParams{};
  params.temperature = -1.0;
  EXPECT_THROW(params.validate("request 0"), std::exception);
}

// vLLM's meaning: top_k -1 (like 0) is "off"; below -1 is a mistake, not "off" too.
TEST(SamplingParams, TopKBelowMinusOneIsRefusedAndMinusOneMeansOff) {
  SamplingParams params;
  for (const int64_t off : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
    params.top_k = off;
    EXPECT_NO_THROW(params.validate("request 0")) << off;
  }
  params.top_k = -5;
  try {
    params.validate("request 0");
    FAIL() << "top_k -5 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "request 0");
    EXPECT_NE(e.problem().find("got -5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::rollout
