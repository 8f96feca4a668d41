// DAPO (Yu et al. 2025) batch-level tricks, as pure functions over rows.
//
// Dynamic sampling: a group whose rewards are all equal has zero GRPO advantage
// for every row, so it only dilutes the batch; DAPO drops such groups and keeps
// sampling until the batch is full. informative_groups() says which groups to
// keep: a group is kept iff max_g(r) != min_g(r) (exact comparison, which unlike
// verl's std > 0 is immune to rounding in the mean). A group of one row is
// all-equal by definition (Aspen's groups are rollout.n >= 2 samples of a prompt).
//
// Overlong reward shaping (soft overlong punishment), for a response of length
// L with maximum length L_max, buffer length L_cache and factor p (1 in the paper):
//   R(L) = 0                               if L <= L_max - L_cache
//        = p * ((L_max - L_cache) - L) / L_cache   if L_max - L_cache < L <= L_max
//        = -p                              if L > L_max
// It is added to the task reward. L_cache = 0 means no buffer (a step at L_max).
//
// Shapes: B rows. Errors: aspen::Error for mis-shaped input or
// invalid lengths. Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <set>
#include <vector>

#include "aspen/algo/imports.h"

namespace aspen::algo {

// DAPO's dynamic-sampling rule, the one place it is written: a group whose rewards are
// all equal has zero advantage for every member, so it teaches nothing. Returns the
// groups of `group_of_row` whose `rewards` (one per row, shaped) are not all equal;
// a group of one row is never informative. Compared exactly, not by a standard
// deviation above zero (the mean of three 0.1s is 0.10000000000000002).
// Errors: aspen::Error when the two vectors differ in length.
std::set<int64_t> informative_groups(const std::vector<int64_t>& group_of_row,
                                     const std::vector<double>& rewards);

struct OverlongBuffer {
  int64_t max_length = 0;     // L_max > 0
  int64_t buffer_length = 0;  // L_cache in [0, L_max]
  double penalty_factor = 1.0;
};

// lengths [B] integer -> [B] float32 penalties (<= 0).
torch::Tensor overlong_penalty(const torch::Tensor& lengths, const OverlongBuffer& buffer);

}  // namespace aspen::algo
