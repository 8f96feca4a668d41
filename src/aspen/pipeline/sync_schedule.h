// SyncSchedule: the synchronous baseline of DESIGN — the colocated verl /
// MindSpeed-RL schedule. Each iteration runs its stages in order, each stage a
// dock consumer (rl_stages.h) that claims every row of the iteration:
//   1. rollout (RolloutEngine, n samples per prompt)  -> prompt, response, rollout_logprobs
//   2. reward (verifier, + DAPO overlong shaping)      -> scores
//   3. reference log-probs (KL in loss or reward)      -> ref_logprobs
//   4. old log-probs: recomputed by the actor, or the rollout's own log-probs when the
//      update is exactly on-policy (one epoch, one mini-batch): same weights, same math
//   5. critic values (ppo)                             -> values
//   6. advantages per complete group                   -> advantages (+ returns)
//   7. epochs x mini-batch actor (and critic) updates
//   8. new weights (version v+1) to the rollout engine
// DAPO dynamic sampling draws more prompts until the batch holds
// prompts_per_iteration informative groups (at most 4 rounds).
// Thread safety: see schedule.h.
#pragma once

#include "aspen/pipeline/schedule.h"

namespace aspen {

// Greedy accuracy (fraction of examples scoring >= 1) of the current policy.
double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens);

// Engine settings of the run's rollout (shared by both schedules).
EngineConfig rollout_engine_config(const TrainConfig& config, const RlSetup& setup);

// The sampling parameters of a training rollout, seeded per prompt group.
SamplingParams rollout_sampling(const TrainConfig& config, int64_t group_id);

// The rollout request of one prompt group, named by its group id.
GenerationRequest group_request(const TrainConfig& config, const RlSetup& setup,
                                const PromptGroup& group);

}  // namespace aspen
