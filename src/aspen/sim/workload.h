// Workload: the response lengths a simulated rollout generates, fixed per prompt group
// (seeded by the group id, so sync and async simulate the same samples):
//   lognormal   each sample's length ~ round(LogNormal(ln median, sigma)), in
//               [1, max_tokens]; sigma 0 gives every sample `median` tokens;
//   long tail   the groups the real run forces to max_tokens
//               (rollout.long_tail_fraction, the same draw: rollout_requests.h) make
//               every sample max_tokens long: a mixture with a long-tail fraction.
//   replay      a real run's groups instead (its metrics.jsonl `response_lengths`, in
//               order): group g takes recorded group g mod their count, sample j its
//               sample j mod the recorded group's size, capped at max_tokens;
//               group-length correlation and the long tail are the run's own.
// Prompts have `prompt_tokens` tokens each.
// Tools (multi-turn trajectories, agentic RL): with turns > 1 a sample's response splits
// into that many model turns of near-equal length (fewer when it is shorter than
// `turns` tokens); after each turn but the last a tool call waits LogNormal(ln
// latency_median_s, latency_sigma) seconds, seeded by (group, sample, turn) so both sides
// wait the same, and its result adds observation_tokens to the context (prefilled on
// return, not trained).
// Thread safety: pure. Errors: aspen::Error naming the simulate.* key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aspen/sim/imports.h"

namespace aspen::sim {

struct LengthModel {
  double median = 1024;
  double sigma = 1.0;
  int64_t max_tokens = 16384;
  double long_tail_fraction = 0.0;
  int64_t prompt_tokens = 256;
  uint64_t seed = 1;
  // Non-empty: replay these groups' lengths (load_replay).
  std::shared_ptr<const std::vector<std::vector<int64_t>>> replay;

  void validate() const;
  // The n response lengths of group `group_id`.
  std::vector<int64_t> group_lengths(int64_t group_id, int64_t n) const;
};

struct ToolModel {
  int64_t turns = 1;
  double latency_median_s = 0;
  double latency_sigma = 1.0;
  int64_t observation_tokens = 64;
  uint64_t seed = 1;

  bool multi_turn() const { return turns > 1; }
  void validate() const;
  // The cumulative token counts at which a `length`-token response's turns end (the
  // last is `length`).
  std::vector<int64_t> turn_ends(int64_t length) const;
  double latency_s(int64_t group, int64_t sample, int64_t turn) const;
};

// The recorded groups of a run's metrics.jsonl (every line's "response_lengths").
// aspen::Error naming the file and line for a malformed line, or when no line has them.
std::vector<std::vector<int64_t>> load_replay(const std::string& metrics_path);

}  // namespace aspen::sim
