// Evaluation of a multi-turn run (rollout.environment): every example played as a whole
// trajectory, n samples each, by one RolloutEngine on the policy as it is and the run's
// environments (the same TrajectoryLoop and token contexts as training) or, when `envs`
// has agent options (rollout.agent.command, make_rollout_trajectories), the run's agent
// program once per sample against an endpoint this engine answers (AgentLoop), each sample
// scored by its environment's reward or, when the environment gives none, the
// verifier's score of its last turn (score_final_answer). A sample is correct when it
// scores >= 1. pass@k as pass_at_k.h computes it; also the mean turns and tool calls
// per trajectory and the share that ended on an environment fault.
// Errors: aspen::Error for n < 1. Thread safety: reads setup.model; the caller must not
// train it meanwhile.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/pass_at_k.h"
#include "aspen/pipeline/trajectory_environments.h"

namespace aspen::pipeline {

struct TrajectoryEvalResult {
  PassAtKResult pass;
  double turns_mean = 0.0;
  double tool_calls_mean = 0.0;
  double environment_error_fraction = 0.0;
};

// params.max_tokens caps each turn; stopped at <|im_end|>. Sample i of example e uses
// seed params.seed + e * n + i (turns varied as in training), when params has a seed.
TrajectoryEvalResult evaluate_trajectories(RlSetup& setup, const TrajectoryEnvironments& envs,
                                           const std::vector<TaskExample>& examples,
                                           const SamplingParams& params, int64_t n,
                                           int64_t kv_cache_bytes = int64_t{256} << 20);

}  // namespace aspen::pipeline
