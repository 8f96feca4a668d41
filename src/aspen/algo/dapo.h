// DAPO (Yu et al. 2025) batch-level tricks, as pure functions over rows.
//
// Dynamic sampling: a group whose rewards are all equal has zero GRPO advantage
// for every row, so it only dilutes the batch; DAPO drops such groups and keeps
// sampling until the batch is full. filter_informative_groups() says which
// groups/rows to keep: a group is kept iff max_g(r) != min_g(r) (exact
// comparison, which unlike verl's std > 0 is immune to rounding in the mean).
// Singleton groups are all-equal by definition; keep_singletons = true keeps
// them anyway (verl keeps them, since their GRPO advantage is r itself).
//
// Overlong reward shaping (soft overlong punishment), for a response of length
// L with maximum length L_max, buffer length L_cache and factor p (1 in the paper):
//   R(L) = 0                               if L <= L_max - L_cache
//        = p * ((L_max - L_cache) - L) / L_cache   if L_max - L_cache < L <= L_max
//        = -p                              if L > L_max
// It is added to the task reward. L_cache = 0 means no buffer (a step at L_max).
//
// Shapes: B rows, K kept groups. Errors: aspen::Error for mis-shaped input or
// invalid lengths. Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace aspen {

struct GroupFilter {
  torch::Tensor keep_rows;    // [B] bool
  torch::Tensor kept_groups;  // [K] int64 group ids, ascending
};

// rewards [B] floating, group_ids [B] int64.
GroupFilter filter_informative_groups(const torch::Tensor& rewards, const torch::Tensor& group_ids,
                                      bool keep_singletons = false);

struct OverlongBuffer {
  int64_t max_length = 0;     // L_max > 0
  int64_t buffer_length = 0;  // L_cache in [0, L_max]
  double penalty_factor = 1.0;
};

// lengths [B] integer -> [B] float32 penalties (<= 0).
torch::Tensor overlong_penalty(const torch::Tensor& lengths, const OverlongBuffer& buffer);

}  // namespace aspen
