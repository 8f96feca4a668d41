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
