// `aspen bench dock [--processes 1,2,4,8] [--row-bytes 1024,262144] [--mb-per-producer N]
// --json`: TransferDock vs a central replay buffer across processes
// (bench/dock_bench.h). Workers are this executable's hidden `dock-worker` command.
#include <iostream>

#include "aspen/cli/command.h"
#include "bench/dock_bench.h"

namespace aspen::cli {
namespace {

void setup(CLI::App& root) {
  auto options = std::make_shared<DockBenchOptions>();
  auto mb_per_producer = std::make_shared<int64_t>(options->bytes_per_producer >> 20);
  auto json = std::make_shared<bool>(true);
  CLI::App* command =
      bench_group(root).add_subcommand("dock", "TransferDock vs central buffer rows/s");
  command->add_option("--processes", options->processes, "producer (= consumer) processes")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--row-bytes", options->row_bytes, "row sizes in bytes")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--mb-per-producer", *mb_per_producer, "data each producer writes")
      ->capture_default_str();
  command->add_option("--batch", options->batch_rows, "rows per claim")->capture_default_str();
  command->add_flag("--json", *json, "print JSON (the only format)");
  on_run(command, [options, mb_per_producer] {
    options->bytes_per_producer = *mb_per_producer << 20;
    std::cout << run_dock_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(101, setup);

}  // namespace
}  // namespace aspen::cli
