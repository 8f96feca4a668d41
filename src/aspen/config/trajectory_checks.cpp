#include "aspen/config/trajectory_checks.h"

#include "aspen/config/imports.h"
#include "aspen/util/error.h"

namespace aspen::config {
namespace {

// rollout.agent.command's own refusals, before the shared ones, so that they name its keys.
void check_agent(const TrainConfig& config, const std::string& source) {
  const AgentSection& a = config.rollout.agent;
  if (a.command.empty()) return;
  const std::string key = source + ": rollout.agent.";
  check_input(a.max_concurrent >= 1, "must be >= 1", key + "max_concurrent");
  check_input(a.timeout_s > 0, "must be > 0", key + "timeout_s");
  check_input(config.rollout.environment.kind == EnvironmentKind::kNone,
              "an agent program holds the conversation itself; rollout.environment.kind is " +
                  std::string(name_of(config.rollout.environment.kind)),
              key + "command", "set rollout.environment.kind=none (its limits still apply)");
  check_input(!config.pipeline.partial_rollout,
              "a cut trajectory cannot carry its agent program to another instance",
              source + ": pipeline.partial_rollout", "set it to false with rollout.agent.command");
  check_input(!config.data.chat_template,
              "the endpoint renders the agent's conversation; this would render the prompt twice",
              source + ": data.chat_template", "set it to false with rollout.agent.command");
}

}  // namespace

void check_trajectories(const TrainConfig& config, const std::string& source) {
  check_agent(config, source);
  const bool multi_turn = config.rollout.multi_turn();
  // A TP instance's leader drives the trajectories and plans each turn for its
  // followers (pipeline/rollout_worker.h); a cut unit cannot carry its environment.
  check_input(!(multi_turn && config.data.chat_template),
              "the environment renders the conversation; this would render the prompt twice",
              source + ": data.chat_template", "set it to false with rollout.environment");
  check_input(!(multi_turn && config.rollout.environment.chat_template.empty() &&
                config.model.path.empty()),
              "the built-in model has no chat template of its own",
              source + ": rollout.environment.chat_template", "set it to qwen2.5 or qwen3");
  check_input(!(multi_turn && config.pipeline.partial_rollout),
              "a cut trajectory cannot carry its environment's state to another instance",
              source + ": pipeline.partial_rollout", "set it to false with rollout.environment");
}

}  // namespace aspen::config
