#include "aspen/algo/dapo.h"

#include <torch/torch.h>

#include <limits>

#include "aspen/algo/groups.h"
#include "aspen/util/error.h"

namespace aspen {

GroupFilter filter_informative_groups(const torch::Tensor& rewards, const torch::Tensor& group_ids,
                                      bool keep_singletons) {
  check_input(rewards.defined() && rewards.dim() == 1 && rewards.is_floating_point(),
              "rewards must be a 1-D floating [B] tensor", "filter_informative_groups: rewards");
  GroupIndex g = GroupIndex::from_ids(group_ids);
  check_input(rewards.size(0) == g.inverse.size(0), "rewards and group ids must both be [B]",
              "filter_informative_groups");
  torch::Tensor r = rewards.detach();
  const int64_t G = g.num_groups();
  torch::Tensor hi = torch::full({G}, -std::numeric_limits<double>::infinity(), r.options())
                         .scatter_reduce(0, g.inverse, r, "amax");
  torch::Tensor lo = torch::full({G}, std::numeric_limits<double>::infinity(), r.options())
                         .scatter_reduce(0, g.inverse, r, "amin");
  torch::Tensor keep_group = hi != lo;
  if (keep_singletons) keep_group = keep_group | (g.counts == 1);
  GroupFilter out;
  out.keep_rows = keep_group.index_select(0, g.inverse);
  out.kept_groups = g.ids.masked_select(keep_group);
  return out;
}

torch::Tensor overlong_penalty(const torch::Tensor& lengths, const OverlongBuffer& b) {
  check_input(lengths.defined() && lengths.dim() == 1 && !lengths.is_floating_point(),
              "lengths must be a 1-D integer [B] tensor", "overlong_penalty: lengths");
  check_input(b.max_length > 0, "max_length must be > 0", "overlong_penalty: max_length");
  check_input(b.buffer_length >= 0 && b.buffer_length <= b.max_length,
              "buffer_length must be in [0, max_length]", "overlong_penalty: buffer_length");
  torch::Tensor L = lengths.to(torch::kDouble);
  const double expected = static_cast<double>(b.max_length - b.buffer_length);
  // Linear ramp from 0 at L_max - L_cache to -1 at L_max; beyond L_max, -1.
  torch::Tensor ramp =
      b.buffer_length > 0 ? ((expected - L) / static_cast<double>(b.buffer_length)).clamp(-1.0, 0.0)
                          : torch::zeros_like(L);
  torch::Tensor penalty =
      torch::where(L > static_cast<double>(b.max_length), torch::full_like(L, -1.0), ramp);
  return (penalty * b.penalty_factor).to(torch::kFloat);
}

}  // namespace aspen
