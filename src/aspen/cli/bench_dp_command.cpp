// `aspen bench dp [--model demo|tiny] [--rows N] [--updates N] [--warmup N]
//  [--mini-batch-size N] [--micro-batch-tokens N] [--seed S] --json`: actor-update
// throughput, 2 data-parallel processes x 1 thread against 1 process x 2 threads and
// 1 x 1 (bench/dp_bench.h). It re-invokes this executable, found through
// /proc/self/exe, as `aspen bench dp --worker ...` under the launcher: --worker,
// --threads and --out are that internal interface.
#include <filesystem>
#include <iostream>
#include <memory>

#include "aspen/cli/command.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/imports.h"
#include "bench/dp_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_dp_command {

struct WorkerArguments {
  bool worker = false;
  int threads = 1;
  std::string out;
};

void setup(CLI::App& root) {
  auto options = std::make_shared<DpBenchOptions>();
  auto worker = std::make_shared<WorkerArguments>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand(
      "dp", "Actor update: 2 data-parallel processes vs 2 threads vs 1 thread");
  command->add_option("--model", options->model, "demo (the demo's model) | tiny")
      ->capture_default_str();
  command->add_option("--rows", options->rows, "rows in the global batch")->capture_default_str();
  command->add_option("--updates", options->updates, "timed updates per configuration")
      ->capture_default_str();
  command->add_option("--warmup", options->warmup, "untimed updates first")->capture_default_str();
  command->add_option("--mini-batch-size", options->mini_batch_size,
                      "global rows per optimizer step (0: one step per update)")
      ->capture_default_str();
  command->add_option("--micro-batch-tokens", options->micro_batch_tokens,
                      "packed tokens per micro-batch")
      ->capture_default_str();
  command->add_option("--seed", options->seed, "batch and model seed")->capture_default_str();
  add_device_option(command, options->device);
  command->add_flag("--json", *json, "print JSON (the only format)");
  // Internal: one configuration's rank process (an empty group hides them from --help).
  command->add_flag("--worker", worker->worker)->group("");
  command->add_option("--threads", worker->threads)->group("");
  command->add_option("--out", worker->out)->group("");
  on_run(command, [options, worker] {
    if (worker->worker) {
      run_dp_bench_worker(*options, worker->threads, worker->out);
      return 0;
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::cout << run_dp_bench(*options, self).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(104, setup);

}  // namespace bench_dp_command
}  // namespace aspen::cli
