// algorithm.rollout_correction: verl's spellings read into the section, the old
// algorithm.off_policy keeps working, and conflicting or out-of-range settings are
// refused naming the key.
#include <gtest/gtest.h>

#include "aspen/config/train_config.h"
#include "aspen/util/error.h"

namespace aspen::config {
namespace {

TrainConfig parse(const std::string& yaml) {
  Config config = Config::parse(yaml, "run.yaml");
  return parse_train_config(config);
}

std::string error_input(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const Error& e) {
    return e.input();
  }
  return "(no error)";
}

TEST(RolloutCorrectionConfig, VerlSpellingsAreRead) {
  const TrainConfig c = parse(
      "pipeline:\n  mode: async\nalgorithm:\n  rollout_correction:\n    rollout_is: sequence\n"
      "    rollout_is_threshold: 5\n    rollout_rs: geometric\n    rollout_rs_threshold: 1.001\n"
      "    rollout_rs_threshold_lower: 0.999\n");
  const RolloutCorrectionSection& rc = c.algorithm.rollout_correction;
  EXPECT_EQ(rc.rollout_is, RolloutIsLevel::kSequence);
  EXPECT_EQ(rc.rollout_is_threshold, 5.0);
  EXPECT_EQ(rc.rollout_rs, RolloutRsLevel::kGeometric);
  EXPECT_EQ(rc.rollout_rs_threshold_lower, 0.999);
  // It is the correction: off_policy's auto no longer picks decoupled in async.
  EXPECT_EQ(c.algorithm.off_policy, OffPolicy::kNone);
  EXPECT_EQ(parse("algorithm:\n  rollout_correction:\n    rollout_is: null\n")
                .algorithm.rollout_correction.rollout_is,
            RolloutIsLevel::kNone);
}

TEST(RolloutCorrectionConfig, OffPolicyStillWorksAlone) {
  EXPECT_EQ(parse("pipeline:\n  mode: async\n").algorithm.off_policy, OffPolicy::kDecoupled);
  const TrainConfig tis = parse("algorithm:\n  off_policy: tis\n  off_policy_cap: 2\n");
  EXPECT_EQ(tis.algorithm.off_policy, OffPolicy::kTis);
  // routing replay alone corrects nothing: auto still resolves as before.
  EXPECT_EQ(parse("pipeline:\n  mode: async\nmodel:\n  kind: qwen3_moe\nalgorithm:\n"
                  "  rollout_correction:\n    routing_replay: true\n")
                .algorithm.off_policy,
            OffPolicy::kDecoupled);
}

TEST(RolloutCorrectionConfig, ConflictsAndBadValuesNameTheKey) {
  EXPECT_EQ(error_input("algorithm:\n  off_policy: tis\n  off_policy_cap: 2\n"
                        "  rollout_correction:\n    rollout_is: token\n"),
            "run.yaml: algorithm.off_policy");
  EXPECT_EQ(error_input("algorithm:\n  rollout_correction:\n    rollout_is: tokens\n"),
            "run.yaml: algorithm.rollout_correction.rollout_is");
  EXPECT_EQ(error_input("algorithm:\n  rollout_correction:\n    rollout_is_threshold: 0\n"),
            "run.yaml: algorithm.rollout_correction.rollout_is_threshold");
  EXPECT_EQ(error_input("algorithm:\n  rollout_correction:\n    rollout_rs: token\n"
                        "    rollout_rs_threshold: 2\n    rollout_rs_threshold_lower: 3\n"),
            "run.yaml: algorithm.rollout_correction.rollout_rs_threshold_lower");
  EXPECT_EQ(error_input("algorithm:\n  rollout_correction:\n    bypass_mode: true\n"
                        "    rollout_is: token\n"),
            "run.yaml: algorithm.rollout_correction.bypass_mode");
  EXPECT_EQ(error_input("algorithm:\n  rollout_correction:\n    routing_replay: true\n"),
            "run.yaml: algorithm.rollout_correction.routing_replay");  // a dense model
}

}  // namespace
}  // namespace aspen::config
