// The synthetic benchmark environment (agent/synthetic_environment.h): its log-normal
// latencies, their seeding, the episode's turns and the observation's token count.
#include "aspen/agent/synthetic_environment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "support/oracles.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

AnswerVerifier exact_answer() {
  return [](const std::string& answer, const ordered_json& row) {
    return answer == row.at("answer").get<std::string>() ? 1.0 : 0.0;
  };
}

ordered_json row(const std::string& id) {
  return {{"prompt", "What is 2+2?"}, {"answer", "4"}, {"id", id}};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

TEST(SyntheticEnvironmentTest, LatenciesAreLogNormalAroundTheMedian) {
  SyntheticEnvironmentOptions options;
  options.tool_latency_ms = 200;
  options.tool_latency_sigma = 0.5;
  SyntheticEpisodeSeeds seeds(7);
  std::vector<double> latencies, logs;
  for (int episode = 0; episode < 4000; ++episode) {
    const uint64_t seed = seeds.next("row");
    for (int call = 0; call < 2; ++call) {
      latencies.push_back(synthetic_tool_latency_s(options, seed, call));
      logs.push_back(std::log(latencies.back()));
    }
  }
  // 8000 draws: the sample median's standard error is about 1.25 * sigma / sqrt(n) = 0.7%
  // in log space; 3% is beyond chance.
  EXPECT_NEAR(median(latencies), 0.2, 0.2 * 0.03);
  double mean = 0, square = 0;
  for (double l : logs) mean += l;
  mean /= static_cast<double>(logs.size());
  for (double l : logs) square += (l - mean) * (l - mean);
  EXPECT_NEAR(std::sqrt(square / static_cast<double>(logs.size())), 0.5, 0.02);
  EXPECT_NEAR(mean, std::log(0.2), 0.02);
}

TEST(SyntheticEnvironmentTest, ZeroSigmaWaitsTheMedianAndZeroLatencyNothing) {
  SyntheticEnvironmentOptions options;
  options.tool_latency_ms = 30;
  options.tool_latency_sigma = 0;
  EXPECT_DOUBLE_EQ(synthetic_tool_latency_s(options, 123, 0), 0.03);
  options.tool_latency_ms = 0;
  options.tool_latency_sigma = 1;
  EXPECT_DOUBLE_EQ(synthetic_tool_latency_s(options, 123, 1), 0.0);
}

TEST(SyntheticEnvironmentTest, SeedsAreDeterministicPerRowAndOccurrence) {
  SyntheticEpisodeSeeds a(1), b(1), other(2);
  const uint64_t a0 = a.next("x"), a1 = a.next("x"), ay = a.next("y");
  // Another order of rows gives each (row, occurrence) the same seed.
  const uint64_t by = b.next("y"), b0 = b.next("x"), b1 = b.next("x");
  EXPECT_EQ(a0, b0);
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(ay, by);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, ay);
  EXPECT_NE(other.next("x"), a0);
}

TEST(SyntheticEnvironmentTest, AnEpisodeIdGivesTheSameDrawsInAnyStartOrder) {
  SyntheticEnvironmentOptions options;
  options.turns = 2;
  options.tool_latency_ms = 0;
  options.observation_tokens = 12;
  auto observation = [&](SyntheticEnvironment& env, int64_t group, int64_t sample) {
    env.reset_episode(row("r"), EpisodeId{group, sample});
    return env.step("t").observations.at(0).content;
  };
  // One pool starts (g 4, s 0) then (4, 1); another the other way round, after an
  // unrelated episode: each trajectory draws what it drew in the first.
  SyntheticEnvironment first(std::make_shared<SyntheticEpisodeSeeds>(5), exact_answer(), options);
  SyntheticEnvironment second(std::make_shared<SyntheticEpisodeSeeds>(5), exact_answer(), options);
  const std::string s0 = observation(first, 4, 0), s1 = observation(first, 4, 1);
  second.reset(row("r"));
  EXPECT_EQ(observation(second, 4, 1), s1);
  EXPECT_EQ(observation(second, 4, 0), s0);
  EXPECT_NE(s0, s1);
  EXPECT_NE(observation(first, 5, 0), s0);  // another group draws anew
}

TEST(SyntheticEnvironmentTest, EpisodeHasItsTurnsToolCallsAndVerifierReward) {
  SyntheticEnvironmentOptions options;
  options.turns = 3;
  options.tool_latency_ms = 0;
  options.observation_tokens = 5;
  SyntheticEnvironment env(std::make_shared<SyntheticEpisodeSeeds>(3), exact_answer(), options);
  EXPECT_EQ(env.kind(), "synthetic");
  const ResetResult start = env.reset(row("a"));
  ASSERT_FALSE(start.error);
  ASSERT_EQ(start.messages.size(), 1u);
  EXPECT_EQ(start.messages[0].role, "user");
  EXPECT_TRUE(start.tools.empty());
  for (int turn = 0; turn < 2; ++turn) {
    const StepResult step = env.step("no tool call here");
    ASSERT_FALSE(step.error);
    EXPECT_FALSE(step.done);
    EXPECT_FALSE(step.reward);
    EXPECT_EQ(step.metrics.tool_calls, 1);
    ASSERT_EQ(step.observations.size(), 1u);
    EXPECT_EQ(step.observations[0].role, "tool");
    EXPECT_EQ(step.observations[0].content.size(), 5u);
  }
  const StepResult last = env.step("4");
  EXPECT_TRUE(last.done);
  ASSERT_TRUE(last.reward);
  EXPECT_EQ(*last.reward, 1.0);
  EXPECT_EQ(last.metrics.tool_calls, 0);
  // The episode is over: another step is refused, never a crash.
  EXPECT_TRUE(env.step("4").error);
  env.reset(row("a"));
  env.step("x");
  env.step("x");
  EXPECT_EQ(*env.step("5").reward, 0.0);
}

TEST(SyntheticEnvironmentTest, SameSeedSameObservationsAndAToolCallWaitsItsLatency) {
  SyntheticEnvironmentOptions options;
  options.turns = 2;
  options.tool_latency_ms = 40;
  options.tool_latency_sigma = 0;
  SyntheticEnvironment first(std::make_shared<SyntheticEpisodeSeeds>(9), exact_answer(), options);
  SyntheticEnvironment second(std::make_shared<SyntheticEpisodeSeeds>(9), exact_answer(), options);
  first.reset(row("r"));
  second.reset(row("r"));
  const StepResult a = first.step("t");
  const StepResult b = second.step("t");
  ASSERT_EQ(a.observations.size(), 1u);
  EXPECT_EQ(a.observations[0].content, b.observations[0].content);
  EXPECT_GE(a.metrics.wait_seconds, 0.04);
  EXPECT_LT(a.metrics.wait_seconds, 1.0);
  // The next episode of the same row draws anew.
  first.reset(row("r"));
  EXPECT_NE(first.step("t").observations[0].content, a.observations[0].content);
}

// The digits of an observation are one token each under the Qwen tokenizer's Split
// pre-tokenizer (which the built-in BPE tokenizer shares), so the content is exactly
// observation_tokens tokens.
TEST(SyntheticEnvironmentTest, ObservationIsObservationTokensQwenTokens) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::qwen3_tokenizer_dir());
  SyntheticEnvironmentOptions options;
  options.turns = 4;
  options.tool_latency_ms = 0;
  options.observation_tokens = 48;
  SyntheticEnvironment env(std::make_shared<SyntheticEpisodeSeeds>(5), exact_answer(), options);
  env.reset(row("q"));
  for (int turn = 0; turn < 3; ++turn) {
    const StepResult step = env.step("t");
    ASSERT_EQ(step.observations.size(), 1u);
    EXPECT_EQ(tokenizer.encode(step.observations[0].content).size(), 48u);
  }
}

TEST(SyntheticEnvironmentTest, RefusesOptionsOutOfRangeAndRowsWithoutAPrompt) {
  auto seeds = std::make_shared<SyntheticEpisodeSeeds>(1);
  SyntheticEnvironmentOptions bad;
  bad.turns = 0;
  EXPECT_THROW(SyntheticEnvironment(seeds, exact_answer(), bad), Error);
  bad = {};
  bad.tool_latency_ms = -1;
  EXPECT_THROW(SyntheticEnvironment(seeds, exact_answer(), bad), Error);
  bad = {};
  bad.tool_latency_sigma = std::nan("");
  EXPECT_THROW(SyntheticEnvironment(seeds, exact_answer(), bad), Error);
  bad = {};
  bad.observation_tokens = 0;
  EXPECT_THROW(SyntheticEnvironment(seeds, exact_answer(), bad), Error);
  EXPECT_THROW(SyntheticEnvironment(nullptr, exact_answer(), {}), Error);
  SyntheticEnvironment env(seeds, exact_answer(), {});
  EXPECT_THROW(env.reset(ordered_json{{"question", "?"}}), Error);
}

}  // namespace
}  // namespace aspen::agent
