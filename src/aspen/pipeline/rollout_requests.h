// What a training rollout asks of a RolloutEngine: the engine settings of the run's
// rollout instances, the sampling parameters of a prompt group (seeded per group, so
// the same group samples the same tokens on any instance, rank or resume), and the
// request of one group. Shared by the iteration engine (admission) and the rollout
// workers (requests from claimed rows).
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

// Engine settings of the run's rollout instances (KV cache, batch limits, EOS, seed).
EngineConfig rollout_engine_config(const TrainConfig& config, const RlSetup& setup);

// The KV cache of each of this process's `instances` rollout engines, in bytes:
// rollout.kv_cache_mb, or rollout.kv_cache_fraction of the memory free now on the
// rollout device, split evenly (measure once, before any engine allocates its cache).
int64_t rollout_kv_cache_bytes(const TrainConfig& config, const RlSetup& setup,
                               int64_t instances);

// The sampling parameters of a training rollout, seeded per prompt group. With
// rollout.long_tail_fraction a fixed pseudo-random share of the groups must run to
// max_tokens (min_tokens = max_tokens): the long tail of a real length distribution.
SamplingParams rollout_sampling(const TrainConfig& config, int64_t group_id);
// Whether group `group_id` is one of the long tail (a fixed pseudo-random draw per
// group id, below `fraction`): the same groups in a real run and in its simulation.
bool in_long_tail(double fraction, int64_t group_id);

// The rollout request of one prompt group (rollout.n samples), named by its group id.
GenerationRequest group_request(const TrainConfig& config, const RlSetup& setup,
                                const PromptGroup& group);

}  // namespace aspen::pipeline
