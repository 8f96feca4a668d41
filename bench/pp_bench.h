// `aspen bench pp`: pipeline-parallel training throughput and the measured pipeline
// bubble against the 1F1B theory (p - 1) / (m + p - 1).
//
// For each stage count p (--stages, default 1,2,4) the bench launches p rank processes
// through the launcher (parallel/launcher.h), each running one stage of a seeded Qwen3
// (layers split as parallel/pipeline_stages.h splits them) with ONE intra-op thread
// (torch and OpenBLAS), and for each micro-batch count m (--micro-batches, default
// 1,2,4,8) runs the real 1F1B runner (train/pipeline_runner.h: run_one_f_one_b, p2p
// over Gloo) on m packed micro-batches of rows of variable length, as the balanced
// micro-batcher (train/micro_batches.h) packs them, about --tokens tokens each: one
// optimizer step's forwards and backwards (no optimizer update, which PP does not
// change). `warmup` untimed schedules, then `repeats` timed ones.
//
// The measured bubble. For one schedule, every stage s has the wall time W of the
// whole schedule (from a barrier before it to a barrier after it, on rank 0) and the
// scheduler's account of its main thread inside run_one_f_one_b
// (CLOCK_THREAD_CPUTIME_ID and /proc/thread-self/schedstat): seconds running on a CPU
// (R_s) and seconds runnable but waiting for one (Q_s: preempted by another process). With one intra-op thread
// the stage's forwards, backwards (CPU autograd runs on the calling thread), loss and
// head all run on that thread; Gloo moves the payloads on its own threads; and a stage
// waiting for its neighbour sleeps in a Gloo receive (a condition variable): neither
// running nor runnable. So the stage's idle fraction, the time it had nothing to do,
// is 1 - (R_s + Q_s) / W, and the measured bubble is its mean over stages, summed over
// the repeats (sums of seconds). The runner itself is not instrumented: this is its
// outside, as the kernel sees it. The bubble counts what makes a stage wait: the 1F1B
// dependencies, p2p time the compute does not hide, stages of unequal cost (the first
// embeds, the last runs the head), and a neighbour slowed by another process (other
// load shows through the dependencies; a stage's own preemption is Q_s, not idle).
// bubble_cpu = mean of 1 - R_s / W is the cores' view, counting preemption as idle
// too: p single-threaded stages on c < p cores run at most c / p of the time on
// average, a bubble_cpu of at least 1 - c / p whatever m is; the output marks such runs
// "oversubscribed".
//
// Model: Qwen3, --layers layers of width --hidden (intermediate 3 hidden, heads of 64,
// kv heads half of them), vocabulary 512 (a small head, so the last stage's extra
// work stays a few percent of a stage's), fp32, random weights. The default (8 layers,
// hidden 256, 256-token micro-batches) is chosen so compute dominates p2p on this CPU:
// a stage computes tens of milliseconds per micro-batch while its message (256 x 256
// fp32 = 256 KiB) crosses loopback in well under one.
//
// Result JSON: {"runs": [{"stages", "micro_batches", "tokens_per_step",
//   "micro_batch_tokens": [..], "seconds_per_step", "tokens_per_s", "bubble_measured",
//   "bubble_theory", "bubble_relative_error" (measured / theory - 1; absent at p = 1),
//   "bubble_cpu", "stage_busy_fraction": [(R_s + Q_s) / W], "stage_cpu_fraction":
//   [R_s / W], "oversubscribed"}], "model": {...}, "cores",
//   "threads_per_stage", "repeats", "warmup", "load_average_1m"}.
// Errors: aspen::Error naming the option, or when a configuration's processes fail.
// Thread safety: run_pp_bench forks (call from the main thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct PpBenchOptions {
  std::vector<int64_t> stages = {1, 2, 4};
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  int64_t layers = 8;
  int64_t hidden = 256;
  int64_t tokens = 256;  // packed tokens per micro-batch (about: rows are not split)
  int64_t repeats = 3;   // timed schedules per (p, m)
  int64_t warmup = 1;    // untimed schedules first
  uint64_t seed = 1;

  void validate() const;  // aspen::Error naming the option
};

// Runs every stage count by re-invoking `self_exe` (the aspen executable) as
// `self_exe bench pp --worker ...` through the launcher; returns the JSON above.
nlohmann::json run_pp_bench(const PpBenchOptions& options, const std::string& self_exe);

// One stage count inside one rank process (p = WORLD_SIZE, this stage = RANK): every
// micro-batch count of `options` in turn. Rank 0 writes the runs (a JSON array) to
// `out_path`.
void run_pp_bench_worker(const PpBenchOptions& options, const std::string& out_path);

}  // namespace aspen::bench
