// `aspen bench pipeline`: the synchronous baseline against the asynchronous ASP
// pipeline on the same work — same model (one SFT warm-up, copied to every side),
// same data, algorithm, iterations and samples — then the async side once per
// dispatch policy. Default workload (no config): the demo's tiny Qwen3 after a short
// SFT, responses mostly a few tokens long with rollout.long_tail_fraction of the
// prompt groups forced to the max_tokens cap: a long-tail length distribution.
//
// Per side: effective_tps (trained response tokens / wall seconds of the RL loop,
// AReaL's "consumed tokens"), samples_per_s, final_reward (mean of the last quarter
// of iterations), reward_curve, bubbles (iteration-time-weighted means) and
// wall_seconds, and iterations (each one's seconds, trained tokens and rows, trainer
// stage seconds and rollout_work: the instances' steps, scheduled tokens and busy
// seconds), and versions (rollout_versions_per_row_max, the token-weighted
// rollout_switched_token_fraction, partial_cut_samples / _tokens and
// partial_resumed_samples). ratio = async effective_tps / sync effective_tps.
// simulated: what aspen simulate predicts for both sides from the sync side's
// recorded costs, against the measured figures (sim/simulation_spec.h,
// simulate_bench_pipeline).
//
// With nproc = N > 1 both sides run across N processes, each an `aspen train` rank
// that `aspen launch` starts (self_exe), on the disaggregated placement: one trainer
// rank and N - 1 rollout instance ranks (placement.train.dp=1,
// placement.rollout.instances=N-1, unless the arguments set a placement), the same
// seeds and the same SFT warm-up (done once here and handed to both as model.path).
// The async side runs with --tolerate-exit for its rollout ranks, as a cluster user
// would under pipeline.on_instance_failure: regenerate. The dispatch comparison then
// runs across the same processes.
// With tool_latency (bench/tool_latency_workload.h, issue #35): the trajectories are
// multi-turn with a log-normal tool latency; sync, async and ratio are that workload's,
// and "tool_latency" holds the distribution, turns, observation tokens, and "no_latency"
// (sync, async, ratio: the same trajectories whose tool calls answer at once) and
// "gain_over_no_latency" (ratio / no_latency ratio). Every side then reports
// "trajectories" (means over iterations of turns_mean, tool_calls_mean,
// tool_wait_s_mean) and bubbles.tool_wait.
// Thread safety: runs on the calling thread (plus the pipeline's own threads).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct PipelineBenchOptions {
  std::vector<std::string> arguments;  // optional CONFIG.yaml and key=value overrides
  bool compare_dispatch = true;        // also run every dispatch policy on the async side
  int nproc = 1;                       // > 1: every side across this many processes
  std::string self_exe;                // the aspen executable (nproc > 1)
  std::string tool_latency;            // "lognormal:MEDIAN_MS:SIGMA"; empty: single-turn
  int64_t tool_turns = 3;              // with tool_latency: model turns per trajectory
  int64_t observation_tokens = 32;     // with tool_latency: tokens per tool message
};

nlohmann::json run_pipeline_bench(const PipelineBenchOptions& options);

}  // namespace aspen::bench
