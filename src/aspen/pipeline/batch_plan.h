// BatchPlan: what the admitting trainer (trainer 0) chose for one iteration's batch,
// which every other data-parallel trainer then trains on: the groups, the policy
// version of each trained row, and the reward statistics of every group drawn.
//
// encode_batch_plan / decode_batch_plan: its one encoding, binary (dock/wire_format.h's
// ByteWriter and ByteReader), posted on the dock's status board under "batch/<index>".
// decode_batch_plan(encode_batch_plan(p)) equals p field for field.
// Errors: aspen::Error for a truncated or malformed encoding, naming the dock wire.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/pipeline/rl_stages.h"

namespace aspen {

struct BatchPlan {
  std::vector<int64_t> groups;            // the groups trained, in training order
  std::vector<int64_t> trained_versions;  // policy version of each trained row
  int64_t sampling_rounds = 0;            // reward rounds drawn (dynamic sampling)
  RewardStats rewards;                    // of every row scored for this batch
};

std::string encode_batch_plan(const BatchPlan& plan);
BatchPlan decode_batch_plan(const std::string& bytes);

}  // namespace aspen
