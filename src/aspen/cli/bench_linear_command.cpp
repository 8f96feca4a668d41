// `aspen bench linear [--threads N] [--seconds S] --json`: the decode step's GEMMs
// through torch and through the small-batch kernel (bench/linear_bench.h).
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "aspen/parallel/compute_threads.h"
#include "bench/linear_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_linear_command {

struct BenchLinearOptions {
  int threads = 0;
  double seconds = 20.0;
  bool json = true;
};

void setup(CLI::App& root) {
  auto options = std::make_shared<BenchLinearOptions>();
  CLI::App* command = bench_group(root).add_subcommand(
      "linear", "Small-batch (decode) linear layers: torch against Aspen's kernel");
  add_threads_option(command, options->threads);
  command->add_option("--seconds", options->seconds, "total measuring time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--json", options->json, "print JSON (the only format)");
  on_run(command, [options] {
    set_compute_threads(options->threads, "--threads");
    std::cout << run_linear_bench(options->seconds).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(108, setup);

}  // namespace bench_linear_command
}  // namespace aspen::cli
