#include "aspen/util/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

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

TEST(Config, ARepeatedKeyIsAnErrorNamingItsPath) {
  try {
    Config::parse("train:\n  lr: 1e-5\n  epochs: 2\n  lr: 1e-3\n", "dup.yaml");
    FAIL() << "the second lr would have been ignored silently";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "dup.yaml: train.lr");
    EXPECT_NE(e.problem().find("duplicate"), std::string::npos);
  }
  EXPECT_THROW(Config::parse("a: 1\na: 1\n", "dup.yaml"), Error);
  EXPECT_THROW(Config::parse("x:\n  - {k: 1, k: 2}\n", "dup.yaml"), Error);
  EXPECT_NO_THROW(Config::parse("a: {k: 1}\nb: {k: 1}\n", "same key, two mappings"));
}

TEST(Config, NonScalarMappingKeysAreErrorsNotYamlExceptions) {
  // Found by fuzz_config: yaml-cpp's TypedBadConversion escaped for these.
  EXPECT_THROW(Config::parse("? [a, b]\n: 1\n", "k.yaml"), Error);
  EXPECT_THROW(Config::parse("a: {:cb: { [1, {d: null}]}}\n", "k.yaml"), Error);
  Config config = Config::empty("defaults");
  EXPECT_THROW(config.apply_override("x={[1]: 2}"), Error);
  EXPECT_THROW(config.apply_override("x={k: 1, k: 2}"), Error);
}

TEST(Config, ErrorsInOverridesNameTheOverrideNotTheFile) {
  Config config = Config::parse("train:\n  lr: 1e-4\n  epochs: x\n", "run.yaml");
  config.apply_override("train.lr=.inf");
  config.apply_override("data={task_options: {digits: many}}");
  ConfigSection train = config.root().section("train");
  try {
    train.get<double>("lr", 1e-4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "override \"train.lr=.inf\": train.lr");
  }
  try {
    train.get<int64_t>("epochs", 1);  // from the file: the file is named
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "run.yaml: train.epochs");
  }
  // A value inside an overridden section names the override too.
  ConfigSection options = config.root().section("data").section("task_options");
  try {
    options.get<int64_t>("digits", 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.input(),
              "override \"data={task_options: {digits: many}}\": data.task_options.digits");
  }
}

TEST(Config, NonFiniteNumbersAreErrorsNamingTheKey) {
  for (const std::string value : {".inf", "-.inf", ".nan"}) {
    Config config = Config::parse("train:\n  lr: " + value + "\n", "run.yaml");
    try {
      config.root().section("train").get<double>("lr", 1e-4);
      FAIL() << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), "run.yaml: train.lr") << value;
      EXPECT_NE(e.problem().find("finite"), std::string::npos) << e.what();
    }
  }
  // Out of double's range: not a number yaml-cpp converts, so a type error there.
  EXPECT_THROW(Config::parse("train:\n  lr: 1e999\n", "run.yaml")
                   .root()
                   .section("train")
                   .get<double>("lr", 1e-4),
               Error);
  // The same through a command-line override.
  Config config = Config::empty("defaults");
  config.apply_override("train.lr=.inf");
  EXPECT_THROW(config.root().section("train").get<double>("lr", 1e-4), Error);
}

TEST(Config, ADirectoryIsNotAConfigFile) {
  try {
    Config::load_file(::testing::TempDir());
    FAIL() << "a directory read as an empty config would run the built-in demo";
  } catch (const Error& e) {
    EXPECT_NE(e.problem().find("directory"), std::string::npos) << e.what();
  }
}

// "Billion laughs": nine levels of nine aliases, 9^9 values in about 300 bytes, as a
// block mapping (a file) or one flow list (an override value).
std::string alias_bomb(bool flow) {
  std::string yaml = flow ? "[" : "";
  for (char level = 'a'; level <= 'i'; ++level) {
    const std::string name(1, level);
    const std::string item = level == 'a' ? "lol" : "*" + std::string(1, level - 1);
    yaml += flow ? (level == 'a' ? "&" : ", &") + name + " [" : name + ": &" + name + " [";
    for (int i = 0; i < 9; ++i) yaml += (i ? ", " : "") + item;
    yaml += flow ? "]" : "]\n";
  }
  return flow ? yaml + "]" : yaml;
}

TEST(Config, AnAliasBombFailsAtOnceNamingTheFile) {
  const std::string path = ::testing::TempDir() + "/alias_bomb.yaml";
  std::ofstream(path) << alias_bomb(/*flow=*/false);
  const auto start = std::chrono::steady_clock::now();
  try {
    Config::load_file(path);
    FAIL() << "an alias bomb was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), path);
    EXPECT_NE(e.problem().find("aliases"), std::string::npos) << e.what();
  }
  Config config = Config::empty();
  const std::string assignment = "data.task_options.x=" + alias_bomb(/*flow=*/true);
  try {
    config.apply_override(assignment);
    FAIL() << "an alias bomb in an override was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "override \"" + assignment + "\"");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
}

TEST(Config, ModestAliasesStillWork) {
  Config config = Config::parse(
      "defaults: &opts {digits: 3, count: 2}\ntrain:\n  a: *opts\n  b: *opts\n", "alias.yaml");
  ConfigSection train = config.root().section("train");
  EXPECT_EQ(train.section("b").get<int64_t>("digits", 0), 3);
}

TEST(Config, ArgumentsAreOneFileThenOverridesInOrder) {
  const std::string path = ::testing::TempDir() + "/aspen_config_arguments.yaml";
  std::ofstream(path) << "train:\n  lr: 0.5\n  iterations: 3\n";
  Config config = Config::from_arguments({"train.lr=0.25", path, "train.lr=0.125"});
  ConfigSection train = config.root().section("train");
  EXPECT_DOUBLE_EQ(train.get<double>("lr", 0.0), 0.125);  // the last override wins
  EXPECT_EQ(train.get<int64_t>("iterations", 0), 3);      // from the file
  Config defaults = Config::from_arguments({});
  EXPECT_EQ(defaults.root().section("train").get<int64_t>("iterations", 7), 7);
  try {
    Config::from_arguments({path, path});
    FAIL() << "two config files accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.problem().find("more than one config file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen
