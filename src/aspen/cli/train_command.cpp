// `aspen train [CONFIG.yaml] [key.sub=value ...] [--out DIR]`: the main job.
// With no config it runs the built-in demo (every default of docs/config.md):
// a tokenizer and a tiny Qwen3 made from nothing, SFT on arithmetic, then GRPO,
// ending with greedy eval accuracy before and after RL.
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/config_arguments.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/sync_schedule.h"
#include "aspen/pipeline/train_config.h"

namespace aspen::cli {
namespace {

struct TrainOptions {
  std::vector<std::string> arguments;  // CONFIG.yaml and/or key.sub=value overrides
  std::string out_dir = "runs/latest";
};

int run_train(const TrainOptions& options) {
  Config config = config_from_arguments(options.arguments);
  const TrainConfig train_config = parse_train_config(config);

  RlSetup setup = build_rl_setup(train_config);
  const nlohmann::json summary = run_sync_schedule(train_config, setup, options.out_dir);
  const double before = summary["eval_accuracy_before_rl"].get<double>();
  const double after = summary["eval_accuracy_after_rl"].get<double>();
  std::cout << "\n== summary ==\n"
            << "greedy eval accuracy: " << 100.0 * before << "% before RL -> " << 100.0 * after
            << "% after RL (" << (after >= before ? "+" : "") << 100.0 * (after - before)
            << " points)\n"
            << "iterations " << summary["iterations"] << ", samples " << summary["samples"] << ", "
            << summary["wall_seconds"].get<double>() << " s\n"
            << "report: " << options.out_dir
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
  on_run(command, [options] { return run_train(*options); });
}

ASPEN_REGISTER_COMMAND(1, setup);

}  // namespace
}  // namespace aspen::cli
