// Weighted combination of verifiers, the registry, and concurrent const scoring.
#include "aspen/reward/weighted_reward.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "aspen/reward/verifier_registry.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

nlohmann::json accuracy_and_format() {
  return nlohmann::json::parse(R"([
    {"name": "acc", "verifier": "math", "weight": 1.0,
     "options": {"extract": "plain"}},
    {"verifier": "format", "weight": 0.5, "options": {"tags": ["answer"]}}
  ])");
}

TEST(WeightedReward, TotalIsWeightedSumAndComponentsAreRaw) {
  WeightedReward reward = WeightedReward::from_json(accuracy_and_format());
  // "plain" extraction of "<answer>5</answer>" is the whole text: wrong; format right.
  RewardBreakdown b = reward.evaluate({"", "<answer>5</answer>", "5"});
  EXPECT_DOUBLE_EQ(b.total, 0.5);
  ASSERT_EQ(b.components.size(), 2u);
  EXPECT_EQ(b.components[0], (std::pair<std::string, double>{"acc", 0.0}));
  EXPECT_EQ(b.components[1], (std::pair<std::string, double>{"format", 1.0}));

  b = reward.evaluate({"", "5", "5"});
  EXPECT_DOUBLE_EQ(b.total, 1.0);
  EXPECT_DOUBLE_EQ(reward.score({"", "5", "5"}), 1.0);
  EXPECT_EQ(reward.name(), "weighted");
}

TEST(WeightedReward, NegativeWeightsAreAllowed) {
  WeightedReward reward = WeightedReward::from_json(nlohmann::json::parse(
      R"([{"verifier": "math", "weight": -2, "options": {"extract": "plain"}}])"));
  EXPECT_DOUBLE_EQ(reward.score({"", "3", "3"}), -2.0);
}

TEST(WeightedReward, ConfigErrorsNameTheEntry) {
  auto expect_error_mentions = [](const nlohmann::json& spec, const std::string& word) {
    try {
      WeightedReward::from_json(spec, "reward");
      ADD_FAILURE() << "expected an error for " << spec.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  expect_error_mentions(nlohmann::json::array(), "at least one");
  expect_error_mentions(nlohmann::json::object(), "array");
  expect_error_mentions(nlohmann::json::parse(R"([{"weight": 1}])"), "reward[0].verifier");
  expect_error_mentions(nlohmann::json::parse(R"([{"verifier": "maths"}])"), "maths");
  expect_error_mentions(nlohmann::json::parse(R"([{"verifier": "math", "wieght": 1}])"), "wieght");
  expect_error_mentions(nlohmann::json::parse(R"([{"verifier": "math"}, {"verifier": "math"}])"),
                        "duplicate");
  expect_error_mentions(nlohmann::json::parse(R"([{"verifier": "math", "options": {"x": 1}}])"),
                        "reward[0].options: verifier options (math).x");
}

TEST(WeightedReward, AWeightBeyondTheRewardBoundIsRefusedByName) {
  // A weight of 1e300 times a score of 1 would average to inf (JSON null) over a batch.
  try {
    WeightedReward::from_json(nlohmann::json::parse(
        R"([{"name": "huge", "verifier": "math", "weight": 1e300}])"));
    FAIL() << "a weight of 1e300 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"huge\" has weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside [-1e6, 1e6]"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(WeightedReward::from_json(nlohmann::json::parse(
                       R"([{"verifier": "math", "weight": -1e6, "options": {"extract": "plain"}}])"))
                       .score({"", "3", "3"}),
                   -1e6);
}

TEST(VerifierRegistry, KnowsEveryKind) {
  for (const std::string& kind : verifier_kinds()) {
    // A weighted reward is its list of components, a command reward needs its command
    // (started at the first score, not here); the others take default options.
    const nlohmann::json options =
        kind == "weighted"  ? nlohmann::json::parse(R"([{"verifier": "math"}])")
        : kind == "command" ? nlohmann::json{{"command", "cat"}}
        : kind == "http"    ? nlohmann::json{{"url", "http://127.0.0.1:9/score"}}
                            : nlohmann::json::object();
    EXPECT_EQ(make_verifier(kind, options)->name(), kind);
  }
  EXPECT_THROW(make_verifier("weighted", nlohmann::json::object()), Error);
  EXPECT_THROW(make_verifier("command", nlohmann::json::object()), Error);
  EXPECT_THROW(make_verifier("http", nlohmann::json::object()), Error);
}

TEST(WeightedReward, ConcurrentScoringAgreesWithSerial) {
  WeightedReward reward = WeightedReward::from_json(nlohmann::json::parse(R"([
    {"verifier": "math"}, {"verifier": "format"}])"));
  std::vector<RewardInput> inputs;
  for (int i = 0; i < 200; ++i) {
    inputs.push_back({"", "<think>t</think><answer>\\boxed{" + std::to_string(i % 7) + "}</answer>",
                      std::to_string(i % 5)});
  }
  std::vector<double> serial;
  for (const RewardInput& in : inputs) serial.push_back(reward.score(in));
  std::vector<double> parallel(inputs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < inputs.size(); i += 4) parallel[i] = reward.score(inputs[i]);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(serial, parallel);
  EXPECT_DOUBLE_EQ(serial[3], 2.0);  // 3 == 3, well-formed
  EXPECT_DOUBLE_EQ(serial[5], 1.0);  // 5 != 0
}

}  // namespace
}  // namespace aspen::reward
