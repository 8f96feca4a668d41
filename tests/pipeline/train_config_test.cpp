#include "aspen/pipeline/train_config.h"

#include <gtest/gtest.h>

namespace aspen {
namespace {

TEST(TrainConfig, EmptyConfigIsTheBuiltInDemo) {
  Config config = Config::empty();
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_TRUE(parsed.model.path.empty());
  EXPECT_EQ(parsed.data.task, "arithmetic");
  EXPECT_EQ(parsed.algorithm.name, "grpo");
  EXPECT_EQ(parsed.pipeline.mode, "sync");
}

TEST(TrainConfig, DapoTurnsOnItsPublishedDefaults) {
  Config config = Config::parse("algorithm:\n  name: dapo\n", "run.yaml");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_DOUBLE_EQ(parsed.algorithm.clip_ratio_high, 0.28);
  EXPECT_TRUE(parsed.algorithm.dynamic_sampling);
}

void expect_error_at(const std::string& yaml, const std::string& input) {
  Config config = Config::parse(yaml, "run.yaml");
  try {
    parse_train_config(config);
    FAIL() << "expected an error for " << yaml;
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), input) << e.what();
  }
}

TEST(TrainConfig, ErrorsNameTheKeyPath) {
  expect_error_at("train:\n  lrr: 1\n", "run.yaml: train.lrr");
  expect_error_at("rollout:\n  n: many\n", "run.yaml: rollout.n");
  expect_error_at("algorithm:\n  name: ppo2\n", "run.yaml: algorithm.name");
  expect_error_at("rollout:\n  temperature: 0\n", "run.yaml: rollout.temperature");
  expect_error_at("unknown_section: {}\n", "run.yaml: unknown_section");
  expect_error_at("data:\n  task: jsonl\n", "run.yaml: data.path");
}

TEST(TrainConfig, OverridesApplyBeforeParsing) {
  Config config = Config::empty();
  config.apply_override("rollout.n=4");
  config.apply_override("algorithm.name=rloo");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_EQ(parsed.rollout.n, 4);
  EXPECT_EQ(parsed.algorithm.name, "rloo");
}

}  // namespace
}  // namespace aspen
