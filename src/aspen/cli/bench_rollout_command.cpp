// `aspen bench rollout [--model DIR] [--dtype fp32|bf16] [--threads N] [--device D]
//  [--lora-rank R] --json`: prefill/decode tokens/s
// over prompt length x generation length x parallel sequences, and continuous vs
// static batching on a long-tail workload (bench/rollout_bench.h).
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "aspen/cli/device_option.h"
#include "bench/rollout_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_rollout_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<RolloutBenchOptions>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand("rollout", "Rollout engine throughput");
  command->add_option("--model", options->model_dir,
                      "HF model directory (default: random ~10M Qwen3)");
  command->add_option("--kind", options->kind,
                      "without --model: qwen3 or qwen3_moe (the same shape, MLPs top-2 of 8 "
                      "experts), or qwen3_0.6b (Qwen3-0.6B's shape, random)")
      ->capture_default_str();
  add_threads_option(command, options->threads);
  command->add_option("--kv-cache-mb", options->kv_cache_mb,
                      "KV cache budget (0: each workload's cache sized to hold it)")
      ->capture_default_str();
  command->add_option("--kv-cache-fraction", options->kv_cache_fraction,
                      "KV cache as a share of the memory free after loading the model");
  add_device_option(command, options->device);
  command->add_option("--dtype", options->dtype, "weights and compute: fp32 or bf16")
      ->capture_default_str();
  command->add_option("--long-tail-requests", options->long_tail_requests,
                      "requests of the long-tail workload (0: skip it)")
      ->capture_default_str();
  command->add_option("--long-tail-parallel", options->long_tail_parallel,
                      "parallel sequences of the long-tail workload")
      ->capture_default_str();
  command->add_flag("!--no-sampler", options->sampler, "skip the sampler-alone timing");
  command->add_option("--prompt-lens", options->prompt_lens, "grid prompt lengths")
      ->capture_default_str();
  command->add_option("--gen-lens", options->gen_lens, "grid generation lengths")
      ->capture_default_str();
  command->add_option("--parallel", options->parallel, "grid parallel sequences")
      ->capture_default_str();
  command->add_option("--lora-rank", options->lora_rank,
                      "> 0: the grid with rank-R adapters unmerged, then merged (and the "
                      "merge's cost per publish)")
      ->capture_default_str();
  command->add_option("--lora-alpha", options->lora_alpha, "adapter alpha (with --lora-rank)")
      ->capture_default_str();
  command->add_flag("--json", *json, "print JSON (the only format)");
  on_run(command, [options] {
    std::cout << run_rollout_bench(*options).dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(101, setup);

}  // namespace bench_rollout_command
}  // namespace aspen::cli
