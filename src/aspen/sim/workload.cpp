#include "aspen/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "aspen/pipeline/rollout_requests.h"
#include "aspen/util/error.h"

namespace aspen {

void LengthModel::validate() const {
  check_input(median >= 1 && std::isfinite(median), "median " + std::to_string(median),
              "simulate.length_median", "a response length >= 1 token");
  check_input(sigma >= 0 && sigma <= 10, "sigma " + std::to_string(sigma),
              "simulate.length_sigma", "in [0, 10]");
  check_input(prompt_tokens >= 1, std::to_string(prompt_tokens), "simulate.prompt_tokens", ">= 1");
  check_input(max_tokens >= 1, std::to_string(max_tokens), "rollout.max_tokens", ">= 1");
}

std::vector<int64_t> LengthModel::group_lengths(int64_t group_id, int64_t n) const {
  if (in_long_tail(long_tail_fraction, group_id)) {
    return std::vector<int64_t>(static_cast<size_t>(n), max_tokens);
  }
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(group_id));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t& length : lengths) {
    const double x = median * std::exp(sigma * normal(rng));
    length = std::clamp<int64_t>(std::llround(std::min(x, 1e15)), 1, max_tokens);
  }
  return lengths;
}

}  // namespace aspen
