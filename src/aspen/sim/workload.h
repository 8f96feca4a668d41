// Workload: the response lengths a simulated rollout generates, fixed per prompt group
// (seeded by the group id, so sync and async simulate the same samples):
//   lognormal   each sample's length ~ round(LogNormal(ln median, sigma)), in
//               [1, max_tokens]; sigma 0 gives every sample `median` tokens;
//   long tail   the groups the real run forces to max_tokens
//               (rollout.long_tail_fraction, the same draw: rollout_requests.h) make
//               every sample max_tokens long: a mixture with a long-tail fraction.
// Prompts have `prompt_tokens` tokens each.
// Thread safety: pure. Errors: aspen::Error naming the simulate.* key.
#pragma once

#include <cstdint>
#include <vector>

namespace aspen {

struct LengthModel {
  double median = 1024;
  double sigma = 1.0;
  int64_t max_tokens = 16384;
  double long_tail_fraction = 0.0;
  int64_t prompt_tokens = 256;
  uint64_t seed = 1;

  void validate() const;
  // The n response lengths of group `group_id`.
  std::vector<int64_t> group_lengths(int64_t group_id, int64_t n) const;
};

}  // namespace aspen
