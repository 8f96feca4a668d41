// `aspen sft [CONFIG.yaml] [key.sub=value ...] [--out DIR]`: supervised fine-tuning
// on (prompt, answer) data — a built-in task or a JSONL dataset — with the
// `model`, `data`, `train` (sft_steps, sft_batch_size, sft_lr, optimizer keys) and
// `logging` sections of docs/config.md. Writes DIR/final in HF layout (with its
// tokenizer.json), DIR/config.json (the configuration as run), DIR/metrics.jsonl and
// DIR/summary.json (greedy held-out accuracy before and after).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "aspen/config/train_config.h"
#include "aspen/io/jsonl.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/pipeline/pass_at_k.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/util/config.h"
#include "aspen/util/file.h"
#include "aspen/util/seconds_since.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace sft_command {

struct SftCommandOptions {
  std::vector<std::string> arguments;  // CONFIG.yaml and/or key.sub=value overrides
  std::string out_dir = "runs/sft";
  int threads = 0;
};

int run_sft_command(const SftCommandOptions& options) {
  set_compute_threads(options.threads, "--threads");
  Config config = Config::from_arguments(options.arguments);
  const TrainConfig train_config = parse_train_config(config);
  check_input(train_config.train.sft_steps > 0, "must be > 0 for aspen sft", "train.sft_steps");
  namespace fs = std::filesystem;
  // Every output before any work (util/file.h): the run directory and its files.
  check_output_directory(options.out_dir, "--out");
  for (const char* file : {"metrics.jsonl", "config.json", "summary.json"}) {
    check_output_file((fs::path(options.out_dir) / file).string(), std::string("--out's ") + file);
  }
  std::ofstream metrics((fs::path(options.out_dir) / "metrics.jsonl").string(), std::ios::trunc);
  // The configuration as run, as aspen train writes it.
  write_file_atomic((fs::path(options.out_dir) / "config.json").string(),
                    train_config.as_json().dump(2));
  const auto start = std::chrono::steady_clock::now();

  RlSetup setup = build_rl_setup(train_config);
  const int64_t max_tokens = train_config.rollout.max_tokens;
  const double before = greedy_accuracy(setup, setup.eval_examples, max_tokens);
  run_sft_phase(train_config, setup, metrics);
  const double after = greedy_accuracy(setup, setup.eval_examples, max_tokens);
  const std::string final_dir = (fs::path(options.out_dir) / "final").string();
  export_policy(setup, final_dir);
  const double seconds =
      seconds_since(start);
  const nlohmann::json summary = {{"eval_accuracy_before_sft", before},
                                  {"eval_accuracy_after_sft", after},
                                  {"steps", train_config.train.sft_steps},
                                  {"wall_seconds", seconds},
                                  {"final_model", final_dir}};
  write_file_atomic((fs::path(options.out_dir) / "summary.json").string(), summary.dump(2));
  std::cout << "greedy eval accuracy: " << 100.0 * before << "% before SFT -> " << 100.0 * after
            << "% after; model (HF layout): " << final_dir << "\n";
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<SftCommandOptions>();
  CLI::App* command = root.add_subcommand("sft", "Supervised fine-tuning; writes an HF checkpoint");
  command->add_option("config", options->arguments, "CONFIG.yaml and key.sub=value overrides");
  command->add_option("--out", options->out_dir, "run directory")->capture_default_str();
  add_threads_option(command, options->threads);
  on_run(command, [options] { return run_sft_command(*options); });
}

ASPEN_REGISTER_COMMAND(2, setup);

}  // namespace sft_command
}  // namespace aspen::cli
