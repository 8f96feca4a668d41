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

#include <set>
#include <vector>

#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/schedule.h"

namespace aspen {

// What a synchronous schedule (this one and distributed_sync_schedule.h) counts, and
// its checkpoint state: the prompt order, these counters and the KL-in-reward
// coefficient, as {"prompts", "version", "samples", "trained_tokens",
// "kl_reward_coef"}. restore_sync_state reads what sync_state wrote (aspen::Error via
// the JSON library for a state that lacks a field).
struct SyncCounters {
  int64_t version = 0;         // policy version the rollout runs
  int64_t samples = 0;         // rows generated
  int64_t trained_tokens = 0;  // response tokens trained on
};
nlohmann::json sync_state(const PromptSource& prompts, const SyncCounters& counters,
                          const KlController& kl);
void restore_sync_state(const nlohmann::json& state, PromptSource& prompts, SyncCounters& counters,
                        KlController& kl);

// The bubbles of a synchronous iteration: nothing is padded (packed rollout and
// training), no sorting (one barrier batch), the trainer idles while the rollout runs
// (`rollout_seconds`) and the rollout while the trainer works; `skewness` is the
// rollout instances' idle share of the rollout phase (0 with one instance).
nlohmann::json sync_bubbles(const IterationRecord& record, double rollout_seconds, double skewness);

// One sampling round of a synchronous iteration (DAPO refills the batch in rounds):
// its groups count as drawn, the scored groups as kept (with dynamic sampling only
// those whose rewards differ), and its reward statistics join `all`.
void add_sampling_round(const std::vector<PromptGroup>& groups, const RewardStats& round,
                        bool dynamic_sampling, std::set<int64_t>& drawn, std::set<int64_t>& kept,
                        RewardStats& all);

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
