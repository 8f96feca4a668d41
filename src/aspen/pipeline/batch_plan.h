// BatchPlan: what the admitting trainer (trainer 0) chose for one iteration's batch,
// which every other trainer then trains on: the rows (ids, infos and where their
// columns live, split into data-parallel shares) with their shaped scores, and the
// reward statistics of every group drawn, dropped ones included.
//
// encode_batch_plan / decode_batch_plan: its one encoding, binary (dock/wire_format.h's
// ByteWriter and ByteReader, the rows as dock/claim_codec.h's claim), posted on the
// dock's status board under "batch/<index>".
// decode_batch_plan(encode_batch_plan(p)) equals p field for field.
// Errors: aspen::Error for a truncated or malformed encoding, naming the dock wire.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/pipeline/trainer_stages.h"

namespace aspen::pipeline {

struct BatchPlan {
  TrainerRows trained;         // the rows trained, in training order, with their scores
  int64_t sampling_rounds = 0;  // reward rounds drawn (dynamic sampling)
  RewardStats rewards;          // of every row scored for this batch

  // The groups trained, in the order of their first row.
  std::vector<int64_t> groups() const;
  // The policy version of each trained row.
  std::vector<int64_t> versions() const;
};

// The groups of `rows`, in the order of their first row.
std::vector<int64_t> groups_of(const TrainerRows& rows);

std::string encode_batch_plan(const BatchPlan& plan);
BatchPlan decode_batch_plan(const std::string& bytes);

}  // namespace aspen::pipeline
