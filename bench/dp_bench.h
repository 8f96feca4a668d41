// `aspen bench dp`: actor-update throughput with data parallelism against intra-op
// threads on the same cores. Three configurations train the same model on the same
// global batch, each in fresh processes started through the launcher
// (parallel/launcher.h) so none inherits another's thread pools or allocator state:
//   one_proc_one_thread   1 process  x 1 intra-op thread   (baseline)
//   one_proc_two_threads  1 process  x 2 intra-op threads
//   two_procs_one_thread  2 processes x 1 thread, data parallel over Gloo: each rank
//                         trains its token-balanced share (pipeline/dp_shares.h)
// Thread counts are set explicitly in every process, for torch (at::set_num_threads)
// AND OpenBLAS's own pool (util/blas_threads.h), which torch's setting does not reach.
//
// Workload: the demo's model (the built-in Qwen3 shape of config/train_config.h,
// fp32 like the demo, vocab = the demo tokenizer's size) or a tiny one for smoke
// tests; `rows` rows in groups of 8 sharing a prompt, seeded prompt and response
// lengths (long-tailed responses), GRPO token-mean loss, demo optimizer settings.
// Per configuration: `warmup` untimed updates, then `updates` timed ones;
// tokens_per_s = packed tokens trained (prompt + response, all ranks) / seconds.
// Result JSON: {"one_proc_one_thread": {"tokens_per_s", "seconds", "tokens", "updates"},
//   "one_proc_two_threads": {...}, "two_procs_one_thread": {..., "imbalance"},
//   "speedup_dp_vs_threads", "speedup_dp_vs_one_thread", "speedup_threads_vs_one_thread",
//   "workload": {...}, "load_average_1m": <at the start: other work skews the numbers>}
// Errors: aspen::Error when a configuration's processes fail.
// Thread safety: run_dp_bench forks (call from the main thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/imports.h"

namespace aspen::bench {

struct DpBenchOptions {
  std::string model = "demo";  // demo | tiny
  int64_t rows = 128;          // demo: 16 prompts x 8 samples per iteration
  int64_t updates = 3;         // timed updates per configuration
  int64_t warmup = 1;          // untimed updates first (allocator, thread pools)
  int64_t mini_batch_size = 0; // rows per optimizer step (global); 0: one step per update
  int64_t micro_batch_tokens = 4096;  // the demo's train.micro_batch_tokens
  uint64_t seed = 1;
  // cpu | cuda | cuda:N (parallel/device.h); each rank's plain cuda is cuda:LOCAL_RANK,
  // and gradients of CUDA tensors are all-reduced through NCCL.
  std::string device = "cpu";

  void validate() const;  // aspen::Error naming the option
};

// Runs the three configurations by re-invoking `self_exe` (the aspen executable) as
// `self_exe bench dp --worker ...` through the launcher; returns the JSON above.
nlohmann::json run_dp_bench(const DpBenchOptions& options, const std::string& self_exe);

// One configuration inside one rank process: `threads` intra-op threads; data parallel
// when launched with WORLD_SIZE > 1. Rank 0 writes its JSON entry to `out_path`.
void run_dp_bench_worker(const DpBenchOptions& options, int threads, const std::string& out_path);

}  // namespace aspen::bench
