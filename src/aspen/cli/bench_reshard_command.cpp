// `aspen bench reshard [--train-dp N] [--train-pp N] [--train-tp N] [--infer-tp N]
//  [--hidden-size N] [--layers N] [--vocab-size N] [--rollout-workspace-mb N] [--reps N] [--swap-dir DIR]
//  --json`: allgather-swap timing, bytes moved and peak memory with and without swap
// (bench/reshard_bench.h). It re-invokes this executable (/proc/self/exe) under the
// launcher as `aspen bench reshard --worker --out FILE ...`: the internal interface.
#include <filesystem>
#include <iostream>
#include <memory>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "bench/reshard_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_reshard_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<ReshardBenchOptions>();
  auto worker = std::make_shared<bool>(false);
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand(
      "reshard", "Training -> inference layout (allgather) with and without optimizer swap");
  command->add_option("--train-dp", options->train_dp, "training data-parallel ranks")
      ->capture_default_str();
  command->add_option("--train-pp", options->train_pp,
                      "training pipeline stages (each rank holds its stage's layers)")
      ->capture_default_str();
  command->add_option("--train-tp", options->train_tp, "training tensor-parallel size")
      ->capture_default_str();
  command->add_option("--infer-tp", options->infer_tp, "inference tensor-parallel size")
      ->capture_default_str();
  command->add_option("--hidden-size", options->hidden_size, "model hidden size")
      ->capture_default_str();
  command->add_option("--layers", options->num_layers, "model layers")->capture_default_str();
  command->add_option("--vocab-size", options->vocab_size, "model vocabulary")
      ->capture_default_str();
  command->add_option("--rollout-workspace-mb", options->rollout_workspace_mb,
                      "rollout memory (KV cache) held during the window")
      ->capture_default_str();
  command->add_option("--reps", options->reps, "timed reshards")->capture_default_str();
  command->add_option("--swap-dir", options->swap_dir, "directory of the swap file");
  command->add_flag("--json", *json, "print JSON (the only format)");
  command->add_flag("--worker", *worker)->group("");  // internal: one rank's part
  command->add_option("--out", *out)->group("");
  on_run(command, [options, worker, out] {
    if (*worker) {
      run_reshard_bench_worker(*options, *out);
      return 0;
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::cout << run_reshard_bench(*options, self).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(105, setup);

}  // namespace bench_reshard_command
}  // namespace aspen::cli
