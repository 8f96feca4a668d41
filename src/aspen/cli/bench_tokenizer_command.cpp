// `aspen bench tokenizer [--tokenizer PATH] [--seconds S] --json`: encode throughput
// on English prose (bench/tokenizer_bench.h). Defaults to the real Qwen3
// tokenizer.json the tests use, in shared/fixtures/qwen3-tokenizer beside the clone.
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "bench/tokenizer_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_tokenizer_command {

struct BenchTokenizerOptions {
  std::string tokenizer_path =
      ASPEN_SOURCE_DIR "/../shared/fixtures/qwen3-tokenizer/tokenizer.json";
  double seconds = 3.0;
  bool json = true;
};

void setup(CLI::App& root) {
  auto options = std::make_shared<BenchTokenizerOptions>();
  CLI::App* command = bench_group(root).add_subcommand("tokenizer", "Tokenizer encode MB/s");
  command->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json or model directory")
      ->capture_default_str();
  command->add_option("--seconds", options->seconds, "minimum measuring time")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON (the only format)");
  on_run(command, [options] {
    std::cout << run_tokenizer_bench(options->tokenizer_path, options->seconds).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(100, setup);

}  // namespace bench_tokenizer_command
}  // namespace aspen::cli
