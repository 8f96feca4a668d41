// `aspen bench publish [--lora-rank R] [--fetch remote|local] [--reps N] [shape options]
//  --json`: bytes and seconds per weight publish, the full policy against LoRA's
// adapters only, through the run's path (bench/publish_bench.h); with `--delta [--lrs
// LR...] [--warmup-steps N] [--zstd-level L] [--dtype fp32|bf16]`, full sets against deltas after real AdamW
// steps (bench/delta_publish_bench.h).
#include <iostream>
#include <memory>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/threads_option.h"
#include "bench/delta_publish_bench.h"
#include "bench/publish_bench.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace bench_publish_command {

void setup(CLI::App& root) {
  auto options = std::make_shared<PublishBenchOptions>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = bench_group(root).add_subcommand(
      "publish",
      "Bytes and seconds per weight publish: full policy vs LoRA adapters only, or (--delta) "
      "vs deltas after AdamW steps");
  command->add_option("--hidden-size", options->hidden_size, "model hidden size")
      ->capture_default_str();
  command->add_option("--intermediate-size", options->intermediate_size, "MLP width")
      ->capture_default_str();
  command->add_option("--layers", options->num_layers, "model layers")->capture_default_str();
  command->add_option("--heads", options->num_heads, "attention heads")->capture_default_str();
  command->add_option("--kv-heads", options->num_kv_heads, "key/value heads")
      ->capture_default_str();
  command->add_option("--head-dim", options->head_dim, "head dimension")->capture_default_str();
  command->add_option("--vocab-size", options->vocab_size, "vocabulary")->capture_default_str();
  command->add_option("--lora-rank", options->lora_rank, "adapter rank (all seven projections)")
      ->capture_default_str();
  command->add_option("--lora-alpha", options->lora_alpha, "adapter alpha")->capture_default_str();
  command->add_option("--fetch", options->fetch,
                      "remote: a rollout-only rank's fetch over ZeroMQ; local: a colocated "
                      "instance's")
      ->capture_default_str();
  command->add_option("--reps", options->reps, "timed publishes per mode (after a warm-up)")
      ->capture_default_str();
  command->add_flag("--delta", options->delta,
                    "full sets against deltas (pipeline.weight_sync) after real AdamW steps");
  command->add_option("--lrs", options->lrs, "--delta: learning rates, each measured in turn")
      ->capture_default_str();
  command->add_option("--warmup-steps", options->warmup_steps,
                      "--delta: AdamW steps before the measured ones, per learning rate")
      ->capture_default_str();
  command->add_option("--zstd-level", options->zstd_level, "--delta: the deltas' zstd level")
      ->capture_default_str();
  command->add_option("--dtype", options->delta_dtype,
                      "--delta: fp32 (the run's publish, through its path) or bf16 (the codec "
                      "on the weights cast to bf16)")
      ->capture_default_str();
  add_threads_option(command, options->threads);
  command->add_flag("--json", *json, "print JSON (the only format)");
  on_run(command, [options] {
    std::cout << (options->delta ? run_delta_publish_bench(*options) : run_publish_bench(*options))
                     .dump(2)
              << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(106, setup);

}  // namespace bench_publish_command
}  // namespace aspen::cli
