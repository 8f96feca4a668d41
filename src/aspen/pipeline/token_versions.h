// How mixed the policy versions inside trained trajectories are: the per-token column
// rollout_versions (rl_rows.h) under in-flight weight updates (a sequence continues on
// new weights) and partial rollouts (a cut sample resumes later, anywhere).
//   versions per row   distinct versions among a row's tokens (1: one policy sampled it)
//   switched tokens    tokens sampled under a newer version than the row's first token
//                      (its oldest: versions never decrease along a trajectory)
// Thread safety: a value type; pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "aspen/dock/schema.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

struct TokenVersionStats {
  int64_t rows = 0;
  int64_t tokens = 0;
  int64_t versions_total = 0;  // sum over rows of their distinct versions
  int64_t versions_max = 0;    // the most distinct versions in one row
  int64_t switched_tokens = 0;

  void add(const TokenVersionStats& other);
  // rollout_versions_per_row_mean / _max, rollout_switched_token_fraction (0 when empty).
  nlohmann::json metrics() const;
};

// Of every row of a rollout_versions column ([R] int64 per row).
TokenVersionStats token_version_stats(const ColumnData& rollout_versions);

}  // namespace aspen::pipeline
