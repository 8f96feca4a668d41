#include "aspen/rollout/sampling_params.h"

#include <cmath>

#include "aspen/rollout/imports.h"
#include "aspen/util/error.h"

namespace aspen::rollout {

void SamplingParams::validate(const std::string& source) const {
  check_input(std::isfinite(temperature) && temperature >= 0.0,
              "temperature must be >= 0, got " + std::to_string(temperature), source);
  check_input(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1], got " + std::to_string(top_p),
              source);
  check_input(min_p >= 0.0 && min_p <= 1.0, "min_p must be in [0, 1], got " + std::to_string(min_p),
              source);
  // vLLM's meaning: -1 (and 0) turn top-k off; any other negative value is a mistake.
  check_input(top_k >= -1,
              "top_k must be -1 or 0 (off) or >= 1, got " + std::to_string(top_k), source);
  check_input(max_tokens >= 1, "max_tokens must be >= 1, got " + std::to_string(max_tokens),
              source);
  check_input(min_tokens >= 0 && min_tokens <= max_tokens,
              "min_tokens must be in [0, max_tokens], got " + std::to_string(min_tokens), source);
  for (const auto& s : stop) check_input(!s.empty(), "stop strings must not be empty", source);
}

}  // namespace aspen::rollout
