// `aspen dock-worker ...` (hidden): one producer or consumer process of
// `aspen bench dock`, started by the benchmark itself (bench/dock_bench.h). The
// shared token comes from ASPEN_DOCK_TOKEN.
#include "aspen/cli/command.h"
#include "bench/dock_bench.h"

namespace aspen::cli {
namespace {

void setup(CLI::App& root) {
  auto options = std::make_shared<DockBenchWorkerOptions>();
  CLI::App* command = root.add_subcommand("dock-worker", "dock benchmark worker (internal)");
  command->group("");  // hidden from --help
  command->add_option("--role", options->role)
      ->required()
      ->check(CLI::IsMember({"producer", "consumer"}));
  command->add_option("--mode", options->mode)
      ->required()
      ->check(CLI::IsMember({"dock", "central"}));
  command->add_option("--controller", options->controller)->required();
  command->add_option("--rows", options->rows)->required();
  command->add_option("--row-bytes", options->row_bytes)->required();
  command->add_option("--batch", options->batch_rows);
  on_run(command, [options] { return run_dock_bench_worker(*options); });
}

ASPEN_REGISTER_COMMAND(1000, setup);

}  // namespace
}  // namespace aspen::cli
