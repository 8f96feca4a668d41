// `aspen bench pipeline --tool-latency DIST`'s workload (issue #35): the bench's
// trajectories made multi-turn by the synthetic environment (agent/synthetic_environment.h),
// every model turn but the last followed by a tool call that waits a log-normal latency.
//
// DIST: "lognormal:MEDIAN_MS:SIGMA" (SIGMA 0: every call waits the median). With it, the
// bench runs the workload twice on both sides: with the latency, and with the same
// trajectories (turns, observation tokens, tokens generated) whose tool calls answer at
// once ("no_latency"), so the two async/sync ratios differ only by the tools' time.
//
// The overrides (tool_latency_arguments), before the user's own, which win:
//   rollout.environment.kind=synthetic, .chat_template=qwen3 (the built-in model has no
//   template of its own), .synthetic_turns and .max_turns = turns, .observation_tokens,
//   .tool_latency_ms / .tool_latency_sigma, .max_trajectory_tokens = room for every turn
//   at rollout.max_tokens plus every observation with its template wrapping, .threads =
//   every trajectory that can be in flight at once (prompts x n x (max_staleness + 1)):
//   the tool is a service without a concurrency limit, as the simulator models it, so no
//   call queues for a worker thread;
//   rollout.long_tail_fraction=0: trajectories ignore it (rollout_worker_trajectories),
//   and the simulator's calibration would otherwise count long-tail groups that are not;
//   simulate.turns / .tool_latency_ms / .tool_latency_sigma / .observation_tokens: so the
//   bench's `simulated` prediction models the same tool calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/config/train_config.h"
#include "bench/imports.h"

namespace aspen::bench {

struct ToolLatencyWorkload {
  double median_ms = 0;
  double sigma = 0;
  int64_t turns = 3;               // model turns per trajectory (>= 2: at least one call)
  int64_t observation_tokens = 32; // per tool message
};

// Parses DIST into `workload`'s median and sigma; aspen::Error naming --tool-latency for
// anything but "lognormal:MEDIAN_MS:SIGMA" with MEDIAN_MS >= 0 and SIGMA >= 0.
void parse_tool_latency(const std::string& dist, ToolLatencyWorkload& workload);

// The overrides above, for the run whose config without them is `base`; `median_ms`
// replaces the workload's median (0: the no-latency twin).
std::vector<std::string> tool_latency_arguments(const ToolLatencyWorkload& workload,
                                                const TrainConfig& base, double median_ms);

}  // namespace aspen::bench
