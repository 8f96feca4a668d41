// `aspen bench dock [--processes 1,2,4,8] [--row-bytes 1024,262144] [--mb-per-producer N]
// --json`: TransferDock vs a central replay buffer across processes
// (bench/dock_bench.h). Workers are this executable's hidden `dock-worker` command.
// With --soak SECONDS: the dock soak with faults instead (bench/dock_soak.h): random
// SIGKILLs of producers and consumers, then the exactly-once / lost-with-its-producer
// invariants; prints the JSON report and fails (aspen::Error) when one does not hold.
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/util/error.h"
#include "bench/dock_bench.h"
#include "bench/dock_soak.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_dock_command {

void add_soak_options(CLI::App* command, DockSoakOptions& soak) {
  command->add_option("--soak", soak.soak_s, "run the soak with faults for SECONDS instead");
  command->add_option("--producers", soak.producers, "soak: producer processes")
      ->capture_default_str();
  command->add_option("--consumers", soak.consumers, "soak: consumer processes")
      ->capture_default_str();
  command
      ->add_option("--consumer-names", soak.consumer_names,
                   "soak: schema consumers; every row is consumed once by each")
      ->capture_default_str();
  command->add_option("--max-row-bytes", soak.max_row_bytes, "soak: row sizes are 1..this")
      ->capture_default_str();
  command->add_option("--kill-every", soak.kill_every_s, "soak: mean seconds between SIGKILLs")
      ->capture_default_str();
  command->add_option("--seed", soak.seed, "soak: kills, victims and row sizes")
      ->capture_default_str();
  command->add_option("--lease", soak.lease_s, "soak: consumers' lease seconds")
      ->capture_default_str();
}

void setup(CLI::App& root) {
  auto options = std::make_shared<DockBenchOptions>();
  auto soak = std::make_shared<DockSoakOptions>();
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
  command->add_option("--batch", options->batch_rows, "rows per claim (and per put)")
      ->capture_default_str();
  command->add_flag("--json", *json, "print JSON (the only format)");
  add_soak_options(command, *soak);
  on_run(command, [command, options, soak, mb_per_producer] {
    if (command->count("--soak") == 0) {
      options->bytes_per_producer = *mb_per_producer << 20;
      std::cout << run_dock_bench(*options).dump(2) << '\n';
      return 0;
    }
    if (command->count("--batch") > 0) soak->batch_rows = options->batch_rows;
    const nlohmann::json report = run_dock_soak(*soak);
    std::cout << report.dump(2) << std::endl;
    if (!report["violations"].empty()) {
      throw Error("invariants failed: " + report["violations"].dump(), "aspen bench dock --soak",
                  "the report above has the counts and examples");
    }
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(101, setup);

}  // namespace bench_dock_command
}  // namespace aspen::cli
