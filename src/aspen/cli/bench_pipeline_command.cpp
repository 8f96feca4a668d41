// `aspen bench pipeline [CONFIG.yaml] [key=value ...] --json [--no-dispatch] [--device D]
//  [--nproc N] [--tool-latency lognormal:MEDIAN_MS:SIGMA [--tool-turns N]
//  [--observation-tokens N]]`: sync against async ASP on the same work
// (bench/pipeline_bench.h). --tool-latency makes the trajectories multi-turn with timed
// tool calls and also runs the same trajectories without the latency
// (bench/tool_latency_workload.h).
// --device D is train.device=D rollout.device=D. --nproc N runs both sides across N
// processes (1 trainer + N - 1 rollout instance ranks), re-invoking this executable
// (/proc/self/exe) under the launcher.
#include <filesystem>
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/imports.h"
#include "bench/pipeline_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_pipeline_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<PipelineBenchOptions>();
  auto json = std::make_shared<bool>(true);
  auto no_dispatch = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>("cpu");
  CLI::App* command = bench_group(root).add_subcommand(
      "pipeline", "Sync vs async (ASP) RL pipeline on the same work, and dispatch policies");
  command->add_option("config", options->arguments,
                      "CONFIG.yaml and/or key.sub=value overrides (default: built-in workload)");
  command->add_flag("--json", *json, "print JSON (the only format)");
  command->add_flag("--no-dispatch", *no_dispatch, "skip the dispatch-policy comparison");
  add_device_option(command, *device);
  command
      ->add_option("--nproc", options->nproc,
                   "processes per side: 1 trainer + N-1 rollout instance ranks (1: one process)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  command->add_option("--tool-latency", options->tool_latency,
                      "multi-turn trajectories with a tool call after every turn but the last, "
                      "waiting lognormal:MEDIAN_MS:SIGMA (e.g. lognormal:200:0.5); also runs "
                      "them with no latency for comparison");
  command->add_option("--tool-turns", options->tool_turns,
                      "with --tool-latency: model turns per trajectory")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  command->add_option("--observation-tokens", options->observation_tokens,
                      "with --tool-latency: tokens per tool message")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  on_run(command, [options, no_dispatch, device] {
    options->compare_dispatch = !*no_dispatch;
    options->arguments.push_back("train.device=" + *device);
    options->arguments.push_back("rollout.device=" + *device);
    options->self_exe = std::filesystem::read_symlink("/proc/self/exe").string();
    std::cout << run_pipeline_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(103, setup);

}  // namespace bench_pipeline_command
}  // namespace aspen::cli
