// The metrics line of one RL iteration (metrics.jsonl), the same in sync mode and in
// the async pipeline so their curves compare key for key: reward mean/std, accuracy,
// response length mean/max, KL, entropy, clip fraction, grad norm, LR, per-stage
// seconds, tokens/s. The line is checked finite before it is written
// (report/finite_metrics.h).
// It stays in the pipeline, not in report/: the record is made of the stages' results
// (rl_stages.h), which the report module, below the pipeline, cannot see.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/pipeline/token_versions.h"

namespace aspen::pipeline {

struct IterationRecord {
  int64_t index = 0;           // 0-based iteration
  int64_t policy_version = 0;  // after this iteration's update
  RewardStats rewards;         // every row generated for the iteration
  AdvantageStats advantages;
  UpdateStats update;
  TokenVersionStats token_versions;  // the batch's trained rows (trainer 0 reads them all)
  int64_t sampling_rounds = 1;
  nlohmann::json stage_seconds = nlohmann::json::object();
  double seconds = 0.0;  // wall time of the iteration
};

nlohmann::json iteration_metrics(const IterationRecord& record);

}  // namespace aspen::pipeline
