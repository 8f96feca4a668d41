// Group statistics over rows: a group is the n responses sampled for one prompt.
// Group ids are arbitrary int64 labels [B] (need not be contiguous or sorted);
// GroupIndex maps them to dense indices 0..G-1 once, so per-group reductions are
// one index_add each.
//
//   count[g] = n_g = #{b : group(b) = g}
//   group_mean(v)[g] = (1/n_g) sum_{b in g} v[b]
//   group_std(v)[g]  = sqrt( sum_{b in g} (v[b] - mean_g)^2 / (n_g - 1) )   (unbiased,
//                      as torch.std; NaN for n_g = 1, callers decide what a singleton means)
//
// Shapes: B rows, G groups. All tensors live on group_ids' device.
// Thread safety: immutable after construction.
#pragma once

#include <torch/types.h>

#include "aspen/algo/imports.h"

namespace aspen::algo {

struct GroupIndex {
  torch::Tensor ids;      // [G] int64, sorted unique group labels
  torch::Tensor inverse;  // [B] int64, dense group index of each row
  torch::Tensor counts;   // [G] int64, n_g

  // Throws aspen::Error unless group_ids is a 1-D int64 tensor.
  static GroupIndex from_ids(const torch::Tensor& group_ids);
  int64_t num_groups() const { return ids.size(0); }
};

// values [B] floating -> [G] in values' dtype.
torch::Tensor group_mean(const torch::Tensor& values, const GroupIndex& groups);
torch::Tensor group_std(const torch::Tensor& values, const GroupIndex& groups);

}  // namespace aspen::algo
