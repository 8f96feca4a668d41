// `aspen bench train [--model DIR | --kind qwen3|qwen3_moe] [--rows N] [--prompt-tokens P] [--response-tokens T]
//   [--steps S] [--threads N] [--device D] [--dtypes fp32,bf16] [--profile DIR] --json`: the actor update's tokens/s,
// FLOP/s and MFU against a GEMM peak measured in the same run (bench/train_bench.h).
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "bench/train_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_train_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<TrainBenchOptions>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand(
      "train", "Actor update throughput and MFU (fp32, bf16) on a model or a 103M Qwen3 shape");
  command->add_option("--model", options->model_dir,
                      "HF model directory (default: random 103M Qwen3 shape)");
  command->add_option("--kind", options->kind,
                      "without --model: qwen3 or qwen3_moe (the same shape, MLPs top-2 of 8 "
                      "experts)")
      ->capture_default_str();
  command->add_option("--rows", options->rows, "rows per batch")->capture_default_str();
  command->add_option("--prompt-tokens", options->prompt_tokens, "prompt tokens per row")
      ->capture_default_str();
  command->add_option("--response-tokens", options->response_tokens,
                      "response tokens at most per row (uniform from half of it)")
      ->capture_default_str();
  command->add_option("--steps", options->steps, "timed updates per dtype")->capture_default_str();
  add_threads_option(command, options->threads);
  add_device_option(command, options->device);
  command->add_option("--dtypes", options->dtypes, "compute dtypes to time")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--micro-batch-tokens", options->micro_batch_tokens,
                      "packed tokens per forward/backward")
      ->capture_default_str();
  command->add_option("--profile", options->profile_dir,
                      "write DIR/train-<dtype>.trace.json: torch's operator profile of one "
                      "more update (Chrome trace; tools/op_profile_summary.py sums it)");
  command->add_flag("--json", *json, "print JSON (the only format)");
  on_run(command, [options] {
    std::cout << run_train_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(107, setup);

}  // namespace bench_train_command
}  // namespace aspen::cli
