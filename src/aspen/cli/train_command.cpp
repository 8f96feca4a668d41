// `aspen train [CONFIG.yaml] [key.sub=value ...] [--out DIR] [--resume DIR]`: the main job.
// With no config it runs the built-in demo (every default of docs/config.md):
// a tokenizer and a tiny Qwen3 made from nothing, SFT on arithmetic, then GRPO,
// ending with greedy eval accuracy before and after RL.
// --resume DIR continues the run in DIR from its newest checkpoint, with the config
// that run wrote (DIR/config.json); key=value overrides still apply on top (e.g.
// train.iterations=200 to extend it), a second config file is an error.
// Under `aspen launch` (WORLD_SIZE > 1) every rank runs it; placement.train.dp and
// placement.rollout.instances must equal WORLD_SIZE (see rl_run.h), and rank 0 writes
// the run directory and prints the summary.
#include <filesystem>
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/config/train_config.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/util/config.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace train_command {

struct TrainOptions {
  std::vector<std::string> arguments;  // CONFIG.yaml and/or key.sub=value overrides
  std::string out_dir = "runs/latest";
  std::string resume_dir;
  bool config_reference = false;
};

int run_train(const TrainOptions& options) {
  if (options.config_reference) {
    // The key tables of docs/config.md, from the field description that reads them.
    for (const std::string& section : config_sections()) {
      std::cout << "## " << section << "\n\n" << config_reference_markdown(section) << "\n";
    }
    return 0;
  }
  RunOptions run;
  run.out_dir = options.out_dir;
  std::vector<std::string> arguments = options.arguments;
  if (!options.resume_dir.empty()) {
    for (const auto& argument : arguments) {
      check_input(argument.find('=') != std::string::npos,
                  "--resume takes the run's own config.json; give only key=value overrides",
                  argument);
    }
    const std::string config_path = options.resume_dir + "/config.json";
    check_input(std::filesystem::exists(config_path), "not a run directory (no config.json)",
                options.resume_dir);
    arguments.insert(arguments.begin(), config_path);
    run.out_dir = options.resume_dir;
    run.resume = true;
  }
  Config config = Config::from_arguments(arguments);
  const TrainConfig train_config = parse_train_config(config);

  RlSetup setup = build_rl_setup(train_config);
  const nlohmann::json summary = run_rl(train_config, setup, run);
  // Under aspen launch only rank 0 reports (it owns the run directory).
  if (dist_env_present() && read_dist_env().rank != 0) return 0;
  const double before = summary["eval_accuracy_before_rl"].get<double>();
  const double after = summary["eval_accuracy_after_rl"].get<double>();
  std::cout << "\n== summary ==\n"
            << "greedy eval accuracy: " << 100.0 * before << "% before RL -> " << 100.0 * after
            << "% after RL (" << (after >= before ? "+" : "") << 100.0 * (after - before)
            << " points)\n"
            << "iterations " << summary["iterations"] << ", samples " << summary["samples"] << ", "
            << summary["wall_seconds"].get<double>() << " s\n"
            << "report: " << run.out_dir
            << "/summary.json, metrics: " << summary["metrics"].get<std::string>()
            << "\nfinal model (HF layout): " << summary["final_model"].get<std::string>() << "\n";
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* command =
      root.add_subcommand("train", "RL post-training (no config: the built-in arithmetic demo)");
  command->add_option("config", options->arguments, "CONFIG.yaml and key.sub=value overrides");
  command->add_option("--out", options->out_dir, "run directory")->capture_default_str();
  command->add_option("--resume", options->resume_dir,
                      "continue the run in this directory from its newest checkpoint");
  command->add_flag("--config-reference", options->config_reference,
                    "print every config key with its default and meaning (markdown) and exit");
  command->footer(
      "Configuration: a YAML file and/or key.sub=value overrides, sections model, data,\n"
      "algorithm, rollout, train, pipeline, logging, checkpoint, placement; every key,\n"
      "its default and meaning: docs/config.md or --config-reference. Examples:\n"
      "  aspen train algorithm.name=dapo rollout.n=16 train.lr=1e-5\n"
      "  aspen train run.yaml pipeline.mode=async pipeline.max_staleness=2 --out runs/a\n"
      "Console columns per iteration: reward (mean verifier score), acc (share of\n"
      "samples scoring >= 1), len (mean response tokens), kl (approximate KL of the\n"
      "updated policy to the old one), clip (share of tokens the PPO ratio clipped),\n"
      "seconds; eval_acc is greedy held-out accuracy. Every figure is in\n"
      "OUT/metrics.jsonl (docs/config.md).");
  on_run(command, [options] { return run_train(*options); });
}

ASPEN_REGISTER_COMMAND(1, setup);

}  // namespace train_command
}  // namespace aspen::cli
