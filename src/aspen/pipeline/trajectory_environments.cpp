#include "aspen/pipeline/trajectory_environments.h"
#include "aspen/pipeline/imports.h"

#include "aspen/agent/calculator_tool.h"
#include "aspen/agent/command_environment.h"
#include "aspen/agent/http_environment.h"
#include "aspen/agent/python_tool.h"
#include "aspen/agent/synthetic_environment.h"
#include "aspen/agent/tools_environment.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

std::shared_ptr<const ToolBox> make_tool_box(const EnvironmentSection& e) {
  auto box = std::make_shared<ToolBox>();
  for (const std::string& name : e.tools) {
    if (name == "calculator") {
      box->add(std::make_shared<CalculatorTool>());
    } else if (name == "python") {
      box->add(std::make_shared<PythonTool>());
    } else {
      throw Error("unknown tool \"" + name + "\"", "rollout.environment.tools",
                  "use calculator or python");
    }
  }
  return box;
}

}  // namespace

double score_final_answer(const RlSetup& setup, const nlohmann::ordered_json& row,
                          const std::string& answer) {
  TaskExample example;
  example.prompt_text = row.at("prompt").get<std::string>();
  example.ground_truth = nlohmann::json::parse(row.at("answer").dump());
  example.id = row.at("id").get<std::string>();
  example.verifier = row.value("verifier", std::string());
  return verifier_for(setup, example)
      .score(RewardInput{example.prompt_text, answer, example.ground_truth, {{"id", example.id}}});
}

namespace {

// The template, the loop's limits and the data rows: the same under an environment and
// under an agent program.
std::shared_ptr<TrajectoryEnvironments> trajectory_basics(const TrainConfig& config,
                                                          const RlSetup& setup) {
  const EnvironmentSection& e = config.rollout.environment;
  auto out = std::make_shared<TrajectoryEnvironments>();
  out->chat_template = std::make_shared<const ChatTemplate>(
      e.chat_template.empty() ? ChatTemplate::from_config(config.model.path)
                              : ChatTemplate::builtin(e.chat_template));
  out->loop.max_turns = e.max_turns;
  out->loop.max_turn_tokens = config.rollout.max_tokens;
  out->loop.max_trajectory_tokens = e.max_trajectory_tokens;
  out->loop.enable_thinking = config.data.enable_thinking;
  out->loop.threads = static_cast<int>(e.threads);
  const RlSetup* run = &setup;
  out->example = [run](int64_t index) -> const TaskExample& {
    check_input(index >= 0 && index < static_cast<int64_t>(run->train_examples.size()),
                "example " + std::to_string(index) + " out of range", "trajectory data row");
    return run->train_examples[static_cast<size_t>(index)];
  };
  out->data_row = [](const TaskExample& example) {
    nlohmann::ordered_json row;
    row["prompt"] = example.prompt_text;
    row["answer"] = nlohmann::ordered_json::parse(example.ground_truth.dump());
    row["id"] = example.id;
    row["verifier"] = example.verifier;
    return row;
  };
  return out;
}

}  // namespace

std::shared_ptr<const TrajectoryEnvironments> make_rollout_trajectories(const TrainConfig& config,
                                                                       const RlSetup& setup) {
  const AgentSection& a = config.rollout.agent;
  if (a.command.empty()) return make_trajectory_environments(config, setup);
  std::shared_ptr<TrajectoryEnvironments> out = trajectory_basics(config, setup);
  AgentLoopOptions agent;
  agent.command = a.command;
  agent.timeout_s = a.timeout_s;
  agent.max_concurrent = static_cast<int>(a.max_concurrent);
  agent.limits.max_turns = config.rollout.environment.max_turns;
  agent.on_break =
      a.on_prefix_break == AgentPrefixBreak::kRefuse ? PrefixBreak::kRefuse : PrefixBreak::kSplit;
  agent.max_turn_tokens = config.rollout.max_tokens;
  agent.sampling = rollout_sampling(config, 0);  // its temperature, top-p and top-k
  out->agent = agent;
  return out;
}

std::shared_ptr<const TrajectoryEnvironments> make_trajectory_environments(
    const TrainConfig& config, const RlSetup& setup) {
  const EnvironmentSection& e = config.rollout.environment;
  if (e.kind == EnvironmentKind::kNone) return nullptr;
  std::shared_ptr<TrajectoryEnvironments> out = trajectory_basics(config, setup);
  const RlSetup* run = &setup;
  switch (e.kind) {
    case EnvironmentKind::kTools: {
      const std::shared_ptr<const ToolBox> tools = make_tool_box(e);
      AnswerVerifier verifier = [run](const std::string& answer, const nlohmann::ordered_json& row) {
        return score_final_answer(*run, row, answer);
      };
      ToolsEnvironmentOptions options;
      options.max_turns = static_cast<int>(e.max_turns);
      options.max_observation_bytes = static_cast<size_t>(e.max_observation_bytes);
      options.tool_timeout_s = e.tool_timeout_s;
      out->make_environment = [tools, verifier, options] {
        return std::make_unique<ToolsEnvironment>(tools, verifier, options);
      };
      break;
    }
    case EnvironmentKind::kCommand: {
      CommandEnvironmentOptions options;
      options.command = e.command;
      options.timeout_s = e.timeout_s;
      out->make_environment = [options] { return std::make_unique<CommandEnvironment>(options); };
      break;
    }
    case EnvironmentKind::kHttp: {
      HttpEnvironmentOptions options;
      options.url = e.url;
      options.timeout_s = e.timeout_s;
      out->make_environment = [options] { return std::make_unique<HttpEnvironment>(options); };
      break;
    }
    case EnvironmentKind::kSynthetic: {
      AnswerVerifier verifier = [run](const std::string& answer, const nlohmann::ordered_json& row) {
        return score_final_answer(*run, row, answer);
      };
      SyntheticEnvironmentOptions options;
      options.turns = static_cast<int>(e.synthetic_turns);
      options.tool_latency_ms = e.tool_latency_ms;
      options.tool_latency_sigma = e.tool_latency_sigma;
      options.observation_tokens = static_cast<int>(e.observation_tokens);
      auto seeds = std::make_shared<SyntheticEpisodeSeeds>(config.train.seed);
      out->make_environment = [seeds, verifier, options] {
        return std::make_unique<SyntheticEnvironment>(seeds, verifier, options);
      };
      // The warm-up's demonstrations (one answer per example) are single-turn and wait
      // nothing: a throughput workload's warm-up teaches the answer, and stepping every
      // training example through timed tool calls would sleep for minutes.
      SyntheticEnvironmentOptions single = options;
      single.turns = 1;
      auto demonstration_seeds = std::make_shared<SyntheticEpisodeSeeds>(config.train.seed);
      out->make_demonstration_environment = [demonstration_seeds, verifier, single] {
        return std::make_unique<SyntheticEnvironment>(demonstration_seeds, verifier, single);
      };
      break;
    }
    case EnvironmentKind::kNone:
      break;
  }
  return out;
}

}  // namespace aspen::pipeline
