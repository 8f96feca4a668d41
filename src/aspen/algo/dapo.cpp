#include "aspen/algo/dapo.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

std::set<int64_t> informative_groups(const std::vector<int64_t>& group_of_row,
                                     const std::vector<double>& rewards) {
  check_input(group_of_row.size() == rewards.size(),
              "one group id per reward (" + std::to_string(group_of_row.size()) + " ids, " +
                  std::to_string(rewards.size()) + " rewards)",
              "informative_groups");
  std::map<int64_t, std::pair<double, double>> range;  // group -> (min, max)
  for (size_t i = 0; i < rewards.size(); ++i) {
    const double r = rewards[i];
    auto [it, first] = range.try_emplace(group_of_row[i], r, r);
    if (!first) it->second = {std::min(it->second.first, r), std::max(it->second.second, r)};
  }
  std::set<int64_t> informative;
  for (const auto& [group, low_high] : range) {
    if (low_high.first != low_high.second) informative.insert(group);
  }
  return informative;
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

}  // namespace aspen::algo
