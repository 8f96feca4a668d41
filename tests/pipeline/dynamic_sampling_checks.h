// The checks of one iteration of DAPO's dynamic sampling (algorithm.dynamic_sampling),
// shared by the single-turn run (sync_mode_test.cpp) and the multi-turn one
// (trajectory_schedules_test.cpp): at most 4 sampling rounds and a short batch only
// after the last; rows = (trained + dropped groups) x rollout.n; only informative groups
// train, none twice; no row older than the mode's staleness bound.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_setup.h"

namespace aspen::testing {

// The example of each of the first `groups` groups, by group id: group g is the g-th
// prompt drawn, in the order the engine draws them.
inline std::map<int64_t, int64_t> drawn_examples(const pipeline::RlSetup& setup,
                                                 const config::TrainConfig& config,
                                                 int64_t groups = 400) {
  pipeline::PromptSource order(static_cast<int64_t>(setup.train_examples.size()),
                               config.train.seed);
  std::map<int64_t, int64_t> example_of;
  for (const pipeline::PromptGroup& group : order.next(groups)) {
    example_of[group.group_id] = group.example;
  }
  return example_of;
}

struct DynamicSamplingTally {
  std::set<int64_t> trained;  // group ids
  int64_t dropped = 0;        // groups
};

// `example_of`: group id -> example index (the engine's draw order); `uninformative`:
// whether an example's prompt gets the same reward in every sample.
inline void expect_dynamic_sampling_iteration(
    const nlohmann::json& line, const config::TrainConfig& config, const pipeline::RlSetup& setup,
    const std::map<int64_t, int64_t>& example_of,
    const std::function<bool(const std::string& prompt)>& uninformative,
    DynamicSamplingTally& tally) {
  const int64_t kept = line["trained_groups"].get<int64_t>();
  const int64_t rounds = line["sampling_rounds"].get<int64_t>();
  EXPECT_GE(rounds, 1);
  EXPECT_LE(rounds, 4);
  if (kept < config.rollout.prompts_per_iteration) {
    EXPECT_EQ(rounds, 4) << "a short batch only after the last round";
  }
  const int64_t n = config.rollout.n;
  EXPECT_EQ(line["rows"].get<int64_t>(), (kept + line["dropped_groups"].get<int64_t>()) * n);
  EXPECT_EQ(line["trained_rows"].get<int64_t>(), kept * n);
  tally.dropped += line["dropped_groups"].get<int64_t>();
  for (int64_t group : line["batch_groups"]) {
    const auto& example = setup.train_examples[static_cast<size_t>(example_of.at(group))];
    EXPECT_FALSE(uninformative(example.prompt_text))
        << "group " << group << " has equal rewards and was trained";
    EXPECT_TRUE(tally.trained.insert(group).second) << "group " << group << " trained twice";
  }
  const int64_t bound =
      config.pipeline.mode == config::PipelineMode::kSync ? 0 : config.pipeline.max_staleness;
  for (const auto& [behind, rows] : line["bubbles"]["staleness_histogram"].items()) {
    EXPECT_LE(std::stoll(behind), bound);
  }
}

}  // namespace aspen::testing
