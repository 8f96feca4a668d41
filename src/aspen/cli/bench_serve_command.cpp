// `aspen bench serve --model DIR [--clients 8] [--requests 16] [--max-tokens 32]
//   [--threads N] --json`: the OpenAI-compatible server's throughput with concurrent
// clients against one client at a time, on the same requests (bench/serve_bench.h).
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "bench/serve_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_serve_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<ServeBenchOptions>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command =
      bench_group(root).add_subcommand("serve", "aspen serve: concurrent vs one-at-a-time clients");
  command->add_option("--model", options->model_dir, "HF model directory with its tokenizer")
      ->required();
  command->add_option("--clients", options->clients, "concurrent clients")->capture_default_str();
  command->add_option("--requests", options->requests, "requests per phase")->capture_default_str();
  command->add_option("--max-tokens", options->max_tokens, "tokens per request")
      ->capture_default_str();
  add_threads_option(command, options->threads);
  command->add_option("--kv-cache-mb", options->kv_cache_mb, "KV cache budget")
      ->capture_default_str();
  command->add_flag("--json", *json, "print JSON (the only format)");
  on_run(command, [options] {
    std::cout << run_serve_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(106, setup);

}  // namespace bench_serve_command
}  // namespace aspen::cli
