// `aspen bench pipeline [CONFIG.yaml] [key=value ...] --json [--no-dispatch]`: sync
// against async ASP on the same work (bench/pipeline_bench.h).
#include <iostream>

#include "aspen/cli/command.h"
#include "bench/pipeline_bench.h"

namespace aspen::cli {
namespace {

void setup(CLI::App& root) {
  auto options = std::make_shared<PipelineBenchOptions>();
  auto json = std::make_shared<bool>(true);
  auto no_dispatch = std::make_shared<bool>(false);
  CLI::App* command = bench_group(root).add_subcommand(
      "pipeline", "Sync vs async (ASP) RL pipeline on the same work, and dispatch policies");
  command->add_option("config", options->arguments,
                      "CONFIG.yaml and/or key.sub=value overrides (default: built-in workload)");
  command->add_flag("--json", *json, "print JSON (the only format)");
  command->add_flag("--no-dispatch", *no_dispatch, "skip the dispatch-policy comparison");
  on_run(command, [options, no_dispatch] {
    options->compare_dispatch = !*no_dispatch;
    std::cout << run_pipeline_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(103, setup);

}  // namespace
}  // namespace aspen::cli
