// `aspen dock-worker ...` (hidden): one producer or consumer process of
// `aspen bench dock` (roles producer|consumer, bench/dock_bench.h) or of its soak
// (roles soak-producer|soak-consumer, bench/dock_soak.h), started by the benchmark
// itself. The shared token comes from ASPEN_DOCK_TOKEN.
#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/util/error.h"
#include "bench/dock_bench.h"
#include "bench/dock_soak.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace dock_worker_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<DockBenchWorkerOptions>();
  auto soak = std::make_shared<DockSoakWorkerOptions>();
  CLI::App* command = root.add_subcommand("dock-worker", "dock benchmark worker (internal)");
  command->group("");  // hidden from --help
  command->add_option("--role", options->role)
      ->required()
      ->check(CLI::IsMember({"producer", "consumer", "soak-producer", "soak-consumer"}));
  command->add_option("--mode", options->mode)->check(CLI::IsMember({"dock", "central"}));
  command->add_option("--controller", options->controller)->required();
  command->add_option("--rows", options->rows);
  command->add_option("--row-bytes", options->row_bytes);
  command->add_option("--batch", options->batch_rows);
  // Soak roles only.
  command->add_option("--consumer", soak->consumer);
  command->add_option("--incarnation", soak->incarnation);
  command->add_option("--max-row-bytes", soak->max_row_bytes);
  command->add_option("--seed", soak->seed);
  command->add_option("--lease", soak->lease_s);
  on_run(command, [options, soak] {
    if (options->role.rfind("soak-", 0) == 0) {
      soak->role = options->role;
      soak->controller = options->controller;
      soak->batch_rows = options->batch_rows;
      return run_dock_soak_worker(*soak);
    }
    check_input(!options->mode.empty() && options->rows > 0 && options->row_bytes > 0,
                "--mode, --rows and --row-bytes are required", "dock-worker");
    return run_dock_bench_worker(*options);
  });
}

ASPEN_REGISTER_COMMAND(1000, setup);

}  // namespace dock_worker_command
}  // namespace aspen::cli
