// `aspen eval --model DIR --data F.jsonl [--verifier KIND] [--reward-command CMD]
//   [--n K] [--max-tokens N] [--temperature T] [--top-p P] [--seed S] [key=value ...]`
//
// pass@1 and pass@k of a model on a JSONL dataset, as one JSON object, through the
// same rollout engine and rewards as training (pipeline/pass_at_k.h). Every line of
// F is an example, read as `aspen train` reads data.path (the data.* keys apply:
// data.prompt_field, data.answer_field, data.chat_template, data.system_prompt,
// data.verifier_field, ...). --verifier names the reward (math, countdown, format,
// command, weighted with data.verifier_options); --reward-command CMD is
// data.verifier=command with that command (docs/rewards.md). Without --temperature,
// one sample per example is greedy and several are sampled at temperature 1.
// Prints {"model", "data", "examples", "n", "temperature", "top_p", "max_tokens",
// "mean_score", "pass@1", "pass@2", ..., "pass@n", "response_tokens", "seconds"}.
// With rollout.environment.* (tools, command, http) every example is a multi-turn
// trajectory (pipeline/trajectory_eval.h): --max-tokens caps each turn, and the object
// adds "environment", "turns_mean", "tool_calls_mean", "environment_error_fraction".
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "aspen/config/train_config.h"
#include "aspen/io/model_dir.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/pipeline/pass_at_k.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/trajectory_eval.h"
#include "aspen/util/config.h"
#include "aspen/util/seconds_since.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace eval_command {

struct EvalOptions {
  std::string model_dir;
  std::string data;
  std::optional<std::string> verifier;
  std::optional<std::string> reward_command;
  int64_t n = 1;
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> overrides;
  int threads = 0;
};

int run_eval(const EvalOptions& options) {
  check_input(!(options.verifier && options.reward_command) ||
                  *options.verifier == "command",
              "give --verifier or --reward-command, not both", "aspen eval");
  set_compute_threads(options.threads, "--threads");
  check_model_dir(options.model_dir, "--model");
  const auto start = std::chrono::steady_clock::now();
  // The file is a JSONL dataset: the jsonl-only data.* keys (id_field, chat_template,
  // ...) are checked against data.task, so that comes first.
  // (A JSON string is a YAML scalar whatever the path holds.)
  std::vector<std::string> overrides = {"data.task=jsonl",
                                        "data.path=" + nlohmann::json(options.data).dump()};
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  Config arguments = Config::from_arguments(overrides);
  TrainConfig config = parse_train_config(arguments);
  config.model.path = options.model_dir;
  config.data.task = TaskKind::kJsonl;
  config.data.path = options.data;
  config.data.eval_path = options.data;  // every line, in file order
  config.data.eval_size = 1'000'000;
  config.data.train_size = 1;  // build_rl_setup also reads a training split: keep it small
  if (options.verifier) config.data.verifier = *options.verifier;
  if (options.reward_command) {
    // The flag is the command; data.verifier_options.* overrides (timeout_s,
    // max_restarts) still apply, as they would to data.verifier=command in train.
    config.data.verifier = "command";
    if (!config.data.verifier_options.is_object()) {
      config.data.verifier_options = nlohmann::json::object();
    }
    check_input(!config.data.verifier_options.contains("command"),
                "give the command once: --reward-command or data.verifier_options.command",
                "aspen eval");
    config.data.verifier_options["command"] = *options.reward_command;
  }
  RlSetup setup = build_rl_setup(config);

  SamplingParams params;
  params.temperature = options.temperature.value_or(options.n == 1 ? 0.0 : 1.0);
  params.top_p = options.top_p;
  params.max_tokens = options.max_tokens.value_or(config.rollout.max_tokens);
  params.seed = options.seed;
  params.validate("aspen eval");
  // rollout.environment: every example is a multi-turn trajectory with the run's tools
  // or environment (docs/agents.md), scored by its environment or its last turn.
  const auto trajectories = make_rollout_trajectories(config, setup);
  std::optional<TrajectoryEvalResult> agent;
  if (trajectories) {
    agent = evaluate_trajectories(setup, *trajectories, setup.eval_examples, params, options.n);
  }
  const PassAtKResult result =
      agent ? agent->pass : evaluate_pass_at_k(setup, setup.eval_examples, params, options.n);

  // Scores are bounded (reward/verifier.h), so this holds; a metric is never JSON null.
  check_input(std::isfinite(result.mean_score),
              "the mean score is not finite (" + std::to_string(result.mean_score) + ")",
              "aspen eval", "a verifier returned scores too large to average");
  nlohmann::json out = {{"model", options.model_dir},
                        {"data", options.data},
                        {"examples", result.examples},
                        {"n", options.n},
                        {"temperature", params.temperature},
                        {"top_p", params.top_p},
                        {"max_tokens", params.max_tokens},
                        {"mean_score", result.mean_score}};
  for (const auto& [k, value] : result.pass_at) out["pass@" + std::to_string(k)] = value;
  out["response_tokens"] = result.response_tokens;
  if (agent) {
    out["environment"] = name_of(config.rollout.environment.kind);
    out["turns_mean"] = agent->turns_mean;
    out["tool_calls_mean"] = agent->tool_calls_mean;
    out["environment_error_fraction"] = agent->environment_error_fraction;
  }
  out["seconds"] = seconds_since(start);
  std::cout << out.dump(2) << '\n';
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App* command =
      root.add_subcommand("eval", "pass@1 / pass@k of a model on a JSONL dataset (JSON)");
  command->add_option("--model", options->model_dir, "HF model directory")->required();
  command->add_option("--data", options->data, "JSONL dataset (every line is evaluated)")
      ->required();
  command->add_option("--verifier", options->verifier,
                      "reward: math | countdown | format | command | weighted (default: "
                      "data.verifier, math)");
  command->add_option("--reward-command", options->reward_command,
                      "a reward script speaking JSON lines (data.verifier=command)");
  command->add_option("--n", options->n, "samples per example")->capture_default_str();
  command->add_option("--max-tokens", options->max_tokens,
                      "generated tokens at most (default rollout.max_tokens)");
  command->add_option("--temperature", options->temperature,
                      "default: 0 (greedy) for --n 1, else 1");
  command->add_option("--top-p", options->top_p)->capture_default_str();
  command->add_option("--seed", options->seed, "sample i of example e uses seed + e*n + i")
      ->capture_default_str();
  command->add_option("overrides", options->overrides,
                      "key.sub=value configuration (data.*, rollout.*), as for aspen train");
  add_threads_option(command, options->threads);
  on_run(command, [options] { return run_eval(*options); });
}

ASPEN_REGISTER_COMMAND(3, setup);

}  // namespace eval_command
}  // namespace aspen::cli
