// The RL run driver behind `aspen train`: everything around the schedule.
//   fresh run:  config.json -> greedy eval (untrained) -> SFT warm-up -> greedy eval
//               (before RL) -> iterations of the configured schedule (sync | async)
//   resume:     the newest checkpoint of the run directory restores the policy,
//               reference, critic, optimizers, prompt order, RNG and counters;
//               metrics.jsonl is cut back to that iteration and continues.
//   each iteration: its metrics line (plus eval_accuracy every logging.eval_every and
//               at the end) to metrics.jsonl and a progress line on the console; a
//               checkpoint every checkpoint.every iterations.
//   end:        final/ (HF layout), summary.json, the trace when logging.trace is set.
// Ranks: started by `aspen launch` with WORLD_SIZE = d > 1, every rank runs this
// together (SPMD) on the distributed sync schedule (distributed_sync_schedule.h) over
// the config's placement (colocated or disaggregated, DP x TP training, instances x TP
// rollout), which must need exactly d ranks; pipeline.mode must be sync; otherwise an
// aspen::Error names the field. Each rank runs the SFT
// warm-up, then rank 0's weights are broadcast; evaluations are split over the ranks;
// rank 0 alone writes the run directory (metrics, checkpoints, final/, summary) and a
// trace goes to logging.trace (rank 0) and logging.trace.rank-R (the others).
// --resume reads the checkpoint on every rank, so the run directory must be shared.
// For the sync schedule a resumed run's metrics equal an uninterrupted run's
// (timing fields aside); the async schedule depends on thread timing, so its resume
// continues from the same state without promising identical rows.
// Errors: aspen::Error (e.g. --resume on a directory without a checkpoint).
// Thread safety: run from one thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/train_config.h"

namespace aspen {

struct RunOptions {
  std::string out_dir = "runs/latest";
  bool resume = false;  // continue from out_dir's newest checkpoint
};

// Returns summary.json's content: eval_accuracy_before_rl, eval_accuracy_after_rl,
// iterations, samples, wall_seconds, tokens_per_second, and where things are.
nlohmann::json run_rl(const TrainConfig& config, RlSetup& setup, const RunOptions& options);

// The RL iteration lines ("phase": "rl") of RUN_DIR/metrics.jsonl, in order; empty
// when the file does not exist. aspen::Error naming the file for a malformed line.
std::vector<nlohmann::json> read_rl_metrics(const std::string& run_dir);

}  // namespace aspen
