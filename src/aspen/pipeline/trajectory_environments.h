// What a rollout instance needs to run multi-turn trajectories (rollout.environment,
// issue #35), built once per process from the run's config and setup: the environment
// of each trajectory, the data row it resets from, the chat template and the loop's
// limits.
//
// Data rows: {"prompt": the example's prompt text, "answer": its ground truth, "id",
// "verifier": its verifier kind}. The tools environment renders the prompt as one user
// message; its final answer is scored by the run's verifier of that example
// (verifier_for). A command or http environment receives the row as it is. The prompt text is rendered by
// the template here, so data.chat_template (which renders it at loading) must be off
// with an environment (refused in config).
// Thread safety: the factory and row function may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/agent_loop.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/trajectory_loop.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::pipeline {

struct TrajectoryEnvironments {
  EnvironmentFactory make_environment;
  // The environment the SFT warm-up's demonstrations step through; null: make_environment
  // (set by the synthetic workload, whose demonstrations are single-turn and untimed).
  EnvironmentFactory make_demonstration_environment;
  std::function<nlohmann::ordered_json(const TaskExample& example)> data_row;
  // Train example `index` (the dock's example column); aspen::Error out of range.
  std::function<const TaskExample&(int64_t index)> example;
  std::shared_ptr<const ChatTemplate> chat_template;
  TrajectoryLoopOptions loop;
  // rollout.agent.command: the rollout instances run agent programs (agent_loop.h), not
  // make_environment (null then); max_model_len is the instance's to set.
  std::optional<AgentLoopOptions> agent;
};

// The verifier's score of `answer` (a trajectory's last turn) for the example a data
// row was made from; for trajectories whose environment gave no reward.
double score_final_answer(const RlSetup& setup, const nlohmann::ordered_json& row,
                          const std::string& answer);

// Null when rollout.environment.kind is none. aspen::Error naming the key for a template
// or tool that cannot be had. `setup` must outlive what this returns.
std::shared_ptr<const TrajectoryEnvironments> make_trajectory_environments(
    const TrainConfig& config, const RlSetup& setup);

// What the rollout instances run: make_trajectory_environments, or under
// rollout.agent.command the agent programs' options (with the template and data rows).
// Null for single-turn runs. The SFT warm-up and the evaluations use
// make_trajectory_environments: an agent run warms up and evaluates single-turn.
std::shared_ptr<const TrajectoryEnvironments> make_rollout_trajectories(const TrainConfig& config,
                                                                       const RlSetup& setup);

}  // namespace aspen::pipeline
