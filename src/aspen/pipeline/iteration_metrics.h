// The metrics line of one RL iteration (metrics.jsonl), the same in sync mode and in
// the async pipeline so their curves compare key for key: reward mean/std, accuracy,
// response length mean/max, KL, entropy, clip fraction, grad norm, LR, per-stage
// seconds, tokens/s.
// check_finite_metrics: JSON has no NaN or infinity (nlohmann writes them as null), so
// a metric that is not a finite number would reach metrics.jsonl or summary.json as
// null, read back by every consumer as "missing". It is an error instead, naming the
// key and where, and nothing is written.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/pipeline/rl_stages.h"

namespace aspen {

struct IterationRecord {
  int64_t index = 0;           // 0-based iteration
  int64_t policy_version = 0;  // after this iteration's update
  RewardStats rewards;         // every row generated for the iteration
  AdvantageStats advantages;
  UpdateStats update;
  int64_t sampling_rounds = 1;
  nlohmann::json stage_seconds = nlohmann::json::object();
  double seconds = 0.0;  // wall time of the iteration
};

nlohmann::json iteration_metrics(const IterationRecord& record);

// aspen::Error naming `where` and the key path ("bubbles.skewness") of the first number
// in `metrics` that is NaN or infinite.
void check_finite_metrics(const nlohmann::json& metrics, const std::string& where);

}  // namespace aspen
