// Checks the distributed worker modes share: a failed one throws aspen::Error naming
// the case, which the worker prints before exiting non-zero.
#pragma once

#include <torch/torch.h>

#include <string>

#include "aspen/util/error.h"

namespace aspen::testing {

// `got` equals `want` within the TP tests' tolerances (rtol 1e-4, atol 2e-5); a failure
// names the largest difference from `reference` ("one process", "TP = 1").
inline void expect_close_to(const torch::Tensor& got, const torch::Tensor& want,
                            const std::string& what, const std::string& where,
                            const std::string& reference) {
  check_input(got.sizes() == want.sizes(),
              what + ": shape " + c10::str(got.sizes()) + ", expected " + c10::str(want.sizes()), where);
  const double diff = got.numel() == 0 ? 0.0 : (got - want).abs().max().item<double>();
  check_input(torch::allclose(got, want, /*rtol=*/1e-4, /*atol=*/2e-5),
              what + " differs from " + reference + " by up to " + std::to_string(diff), where);
}

}  // namespace aspen::testing
