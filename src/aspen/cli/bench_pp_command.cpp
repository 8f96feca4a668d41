// `aspen bench pp [--stages 1,2,4] [--micro-batches 1,2,4,8] [--layers N] [--hidden H]
//  [--tokens T] [--repeats N] [--warmup N] [--seed S] --json`: pipeline-parallel
// tokens/s and the measured pipeline bubble against 1F1B's (p - 1) / (m + p - 1)
// (bench/pp_bench.h). It re-invokes this executable, found through /proc/self/exe, as
// `aspen bench pp --worker --out PATH ...` under the launcher, once per stage count:
// --worker and --out are that internal interface.
#include <filesystem>
#include <iostream>
#include <memory>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "bench/pp_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_pp_command {

struct WorkerArguments {
  bool worker = false;
  std::string out;
};

void setup(CLI::App& root) {
  auto options = std::make_shared<PpBenchOptions>();
  auto worker = std::make_shared<WorkerArguments>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand(
      "pp", "Pipeline parallelism: tokens/s and the measured 1F1B bubble for p stages, m micro-batches");
  command->add_option("--stages", options->stages, "stage counts p (one process each)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--micro-batches", options->micro_batches, "micro-batch counts m per step")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--layers", options->layers, "decoder layers")->capture_default_str();
  command->add_option("--hidden", options->hidden, "hidden size (a multiple of 64)")
      ->capture_default_str();
  command->add_option("--tokens", options->tokens, "packed tokens per micro-batch (about)")
      ->capture_default_str();
  command->add_option("--repeats", options->repeats, "timed schedules per (p, m)")
      ->capture_default_str();
  command->add_option("--warmup", options->warmup, "untimed schedules first")->capture_default_str();
  command->add_option("--seed", options->seed, "batch and model seed")->capture_default_str();
  command->add_flag("--json", *json, "print JSON (the only format)");
  // Internal: one stage count's rank process (an empty group hides them from --help).
  command->add_flag("--worker", worker->worker)->group("");
  command->add_option("--out", worker->out)->group("");
  on_run(command, [options, worker] {
    if (worker->worker) {
      run_pp_bench_worker(*options, worker->out);
      return 0;
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::cout << run_pp_bench(*options, self).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(109, setup);

}  // namespace bench_pp_command
}  // namespace aspen::cli
