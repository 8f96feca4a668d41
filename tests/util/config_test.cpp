#include "aspen/util/config.h"

#include <gtest/gtest.h>

namespace aspen {
namespace {

TEST(Config, TypedReadsWithDefaults) {
  Config config = Config::parse("train:\n  lr: 1.0e-5\n  epochs: 2\n  name: run\n", "run.yaml");
  ConfigSection train = config.root().section("train");
  EXPECT_DOUBLE_EQ(train.get<double>("lr", 0.0), 1e-5);
  EXPECT_EQ(train.get<int>("epochs", 1), 2);
  EXPECT_EQ(train.get<std::string>("name", ""), "run");
  EXPECT_EQ(train.get<int>("missing", 7), 7);
  EXPECT_NO_THROW(train.finish());
}

TEST(Config, UnknownKeyIsAnErrorNamingThePath) {
  Config config = Config::parse("train:\n  lrr: 1\n", "run.yaml");
  ConfigSection train = config.root().section("train");
  train.get<double>("lr", 0.0);
  try {
    train.finish();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "run.yaml: train.lrr");
  }
}

TEST(Config, WrongTypeIsAnErrorNamingThePath) {
  Config config = Config::parse("rollout:\n  n: lots\n", "run.yaml");
  ConfigSection rollout = config.root().section("rollout");
  try {
    rollout.get<int>("n", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "run.yaml: rollout.n");
  }
}

TEST(Config, OverridesReplaceAndCreateKeys) {
  Config config = Config::parse("train:\n  lr: 1\n", "run.yaml");
  config.apply_override("train.lr=0.5");
  config.apply_override("pipeline.mode=async");
  config.apply_override("rollout.stop=[1, 2]");
  ConfigSection root = config.root();
  EXPECT_DOUBLE_EQ(root.section("train").get<double>("lr", 0), 0.5);
  EXPECT_EQ(root.section("pipeline").get<std::string>("mode", ""), "async");
  EXPECT_EQ(root.section("rollout").get<std::vector<int>>("stop", {}), (std::vector<int>{1, 2}));
  EXPECT_THROW(config.apply_override("no-equals"), Error);
  EXPECT_THROW(config.apply_override("train.lr.x=1"), Error);  // lr is not a section
}

TEST(Config, MalformedYamlNamesTheFileAndLine) {
  try {
    Config::parse("train:\n  lr: [1, 2\n", "bad.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "bad.yaml");
    EXPECT_NE(e.problem().find("line"), std::string::npos);
  }
}

}  // namespace
}  // namespace aspen
