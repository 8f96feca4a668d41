#include "aspen/pipeline/token_versions.h"

#include <algorithm>
#include <set>

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

void TokenVersionStats::add(const TokenVersionStats& other) {
  rows += other.rows;
  tokens += other.tokens;
  versions_total += other.versions_total;
  versions_max = std::max(versions_max, other.versions_max);
  switched_tokens += other.switched_tokens;
}

nlohmann::json TokenVersionStats::metrics() const {
  return {{"rollout_versions_per_row_mean",
           rows == 0 ? 0.0 : static_cast<double>(versions_total) / static_cast<double>(rows)},
          {"rollout_versions_per_row_max", versions_max},
          {"rollout_switched_token_fraction",
           tokens == 0 ? 0.0 : static_cast<double>(switched_tokens) / static_cast<double>(tokens)}};
}

TokenVersionStats token_version_stats(const ColumnData& rollout_versions) {
  TokenVersionStats stats;
  for (const torch::Tensor& row : rollout_versions.values) {
    const torch::Tensor versions = row.to(torch::kInt64).contiguous();
    const int64_t* v = versions.data_ptr<int64_t>();
    const int64_t n = versions.numel();
    ++stats.rows;
    stats.tokens += n;
    if (n == 0) continue;
    const std::set<int64_t> distinct(v, v + n);
    stats.versions_total += static_cast<int64_t>(distinct.size());
    stats.versions_max = std::max(stats.versions_max, static_cast<int64_t>(distinct.size()));
    stats.switched_tokens += std::count_if(v, v + n, [first = v[0]](int64_t x) { return x > first; });
  }
  return stats;
}

}  // namespace aspen::pipeline
