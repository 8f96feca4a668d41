// rollout.environment: limits only an environment reads are checked only with one
// (single-turn runs with long responses, as the simulator's defaults, stay valid), and
// the synthetic workload's keys are refused out of range, naming the key.
#include <gtest/gtest.h>

#include "aspen/config/train_config.h"
#include "aspen/util/error.h"

namespace aspen::config {
namespace {

TrainConfig parse_environment(const std::string& yaml) {
  Config config = Config::parse(yaml, "run.yaml");
  return parse_train_config(config);
}

std::string environment_error(const std::string& yaml) {
  try {
    parse_environment(yaml);
  } catch (const Error& e) {
    return e.input();
  }
  return "(no error)";
}

TEST(EnvironmentConfig, TrajectoryTokensBindOnlyWithAnEnvironment) {
  EXPECT_EQ(parse_environment("rollout:\n  max_tokens: 4096\n").rollout.max_tokens, 4096);
  EXPECT_NE(environment_error("rollout:\n  max_tokens: 4096\n  environment:\n    kind: synthetic\n"
                        "    chat_template: qwen3\n")
                .find("rollout.environment.max_trajectory_tokens"),
            std::string::npos);
}

TEST(EnvironmentConfig, SyntheticKeysAreReadAndRefusedOutOfRange) {
  const TrainConfig c = parse_environment(
      "rollout:\n  environment:\n    kind: synthetic\n    chat_template: qwen3\n"
      "    synthetic_turns: 4\n    tool_latency_ms: 150\n    tool_latency_sigma: 1\n"
      "    observation_tokens: 7\n");
  EXPECT_EQ(c.rollout.environment.kind, EnvironmentKind::kSynthetic);
  EXPECT_EQ(c.rollout.environment.synthetic_turns, 4);
  EXPECT_EQ(c.rollout.environment.tool_latency_ms, 150);
  EXPECT_EQ(c.rollout.environment.tool_latency_sigma, 1);
  EXPECT_EQ(c.rollout.environment.observation_tokens, 7);
  const std::string head = "rollout:\n  environment:\n    kind: synthetic\n    chat_template: qwen3\n";
  EXPECT_NE(environment_error(head + "    synthetic_turns: 5\n").find("synthetic_turns"),
            std::string::npos);
  EXPECT_NE(environment_error(head + "    tool_latency_sigma: -1\n").find("tool_latency_sigma"),
            std::string::npos);
  EXPECT_NE(environment_error(head + "    observation_tokens: 0\n").find("observation_tokens"),
            std::string::npos);
}

}  // namespace
}  // namespace aspen::config
