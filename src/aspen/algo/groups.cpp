#include "aspen/algo/groups.h"

#include <torch/torch.h>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

GroupIndex GroupIndex::from_ids(const torch::Tensor& group_ids) {
  check_input(group_ids.defined() && group_ids.dim() == 1, "group ids must be a 1-D [B] tensor",
              "group_ids");
  check_input(group_ids.scalar_type() == torch::kInt64, "group ids must be int64", "group_ids");
  GroupIndex g;
  std::tie(g.ids, g.inverse, g.counts) =
      torch::_unique2(group_ids, /*sorted=*/true, /*return_inverse=*/true,
                      /*return_counts=*/true);
  return g;
}

namespace {

void check_values(const torch::Tensor& values, const GroupIndex& groups) {
  check_input(values.defined() && values.dim() == 1 && values.size(0) == groups.inverse.size(0),
              "per-row values must be [B] like the group ids", "group statistics");
  check_input(values.is_floating_point(), "per-row values must be floating point",
              "group statistics");
}

torch::Tensor group_sum(const torch::Tensor& values, const GroupIndex& groups) {
  return torch::zeros({groups.num_groups()}, values.options()).index_add(0, groups.inverse, values);
}

}  // namespace

torch::Tensor group_mean(const torch::Tensor& values, const GroupIndex& groups) {
  check_values(values, groups);
  return group_sum(values, groups) / groups.counts.to(values.scalar_type());
}

torch::Tensor group_std(const torch::Tensor& values, const GroupIndex& groups) {
  check_values(values, groups);
  torch::Tensor mean = group_mean(values, groups);
  torch::Tensor centered = values - mean.index_select(0, groups.inverse);
  torch::Tensor sq = group_sum(centered * centered, groups);
  return (sq / (groups.counts - 1).to(values.scalar_type())).sqrt();
}

}  // namespace aspen::algo
