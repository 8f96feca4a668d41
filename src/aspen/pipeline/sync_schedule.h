// SyncSchedule: the synchronous baseline of DESIGN — the colocated verl /
// MindSpeed-RL schedule. Each iteration runs its stages in order, each stage a
// dock consumer that claims every row of the iteration, computes, puts its
// output columns and acks:
//   1. rollout (RolloutEngine, n samples per prompt)  -> prompt, response, rollout_logprobs
//   2. reward (verifier, + DAPO overlong shaping)      -> scores
//   3. reference log-probs (when kl_coef > 0)          -> ref_logprobs
//   4. old log-probs: recomputed by the actor, or the rollout's own log-probs when the
//      update is exactly on-policy (one epoch, one mini-batch): same weights, same math
//   5. advantages per complete group                   -> advantages
//   6. epochs x mini-batch actor updates
//   7. new weights (version v+1) to the rollout engine
// DAPO dynamic sampling draws more prompts until the batch holds
// prompts_per_iteration informative groups (at most 4 rounds).
//
// Outputs under the run directory: metrics.jsonl (one line per iteration),
// summary.json, config.json (as run) and final/ (HF layout: config.json,
// model.safetensors, tokenizer.json).
// Thread safety: run() drives everything from the calling thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/train_config.h"

namespace aspen {

nlohmann::json run_sync_schedule(const TrainConfig& config, RlSetup& setup,
                                 const std::string& out_dir);

// Greedy accuracy (fraction of examples scoring >= 1) of the current policy.
double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens);

}  // namespace aspen
