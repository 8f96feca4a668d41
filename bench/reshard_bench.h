// `aspen bench reshard`: the allgather-swap flow of MindSpeed-RL, measured.
//
// The launcher starts train_dp x train_pp x train_tp rank processes (fresh processes:
// peak RSS is per process). Each rank holds fp32 master shards of its pipeline stage's
// tensors of a Qwen model in the training layout (model/tp_layout.h; with train_pp > 1
// the resharder also gathers the other stages' layers, parallel/resharder.h) and a real
// AdamW state (one step taken), then
// runs one colocated "rollout window" twice:
//   no swap:   reshard to the inference layout (bf16) -> allocate and touch the
//              rollout workspace (a KV-cache-sized buffer) -> release both;
//   swap:      swap the optimizer state (and any gradients) out to a file
//              (parallel/swap_space.h) -> the same window -> swap back in.
// Peak RSS is measured over each window (util/memory_usage.h: the kernel's VmHWM,
// reset at the window's start), so peak_bytes_swap vs peak_bytes_noswap is the
// memory the swap frees for rollout. The swap window's swap-in runs after the
// rollout ends and is excluded from its peak (peak_bytes_swap_cycle includes it).
// seconds = mean wall time of `reps` reshards (after one warm-up); bytes_moved =
// bytes rank 0 received in one reshard. Rank 0's numbers are reported.
// Result JSON: {"seconds", "bytes_moved", "peak_bytes_swap", "peak_bytes_noswap",
//   "peak_bytes_swap_cycle", "swapped_bytes", "swap_out_seconds", "swap_in_seconds",
//   "published_bytes", "peak_exact", "workload": {...}}
// Errors: aspen::Error when the rank processes fail or an option is invalid.
// Thread safety: run_reshard_bench forks (call from the main thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/imports.h"

namespace aspen::bench {

struct ReshardBenchOptions {
  int train_dp = 1;
  int train_pp = 1;
  int train_tp = 2;
  int infer_tp = 1;
  int64_t hidden_size = 512;
  int64_t num_layers = 8;
  int64_t vocab_size = 16384;
  int64_t rollout_workspace_mb = 64;  // the rollout's own memory (KV cache) in the window
  int reps = 3;
  std::string swap_dir;  // empty: the system temp dir

  void validate() const;  // aspen::Error naming the option
};

nlohmann::json run_reshard_bench(const ReshardBenchOptions& options, const std::string& self_exe);

// One rank's part (under the launcher's environment); rank 0 writes JSON to out_path.
void run_reshard_bench_worker(const ReshardBenchOptions& options, const std::string& out_path);

}  // namespace aspen::bench
