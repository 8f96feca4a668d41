// The multi-turn batch the loss-mask tests share (issue #35): three trajectories of
// 5, 4 and 3 response tokens where 0 marks an environment token (a tool result inside
// the response), including a row that ends with one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "aspen/algo/packed.h"
#include "expect_tensor.h"

namespace aspen::algo::masked_testing {

inline const std::vector<int64_t> kLengths = {5, 4, 3};
inline const std::vector<double> kMask = {1, 1, 0, 0, 1, /**/ 1, 0, 1, 1, /**/ 1, 1, 0};

inline PackedSeqs masked_packing() {
  return PackedSeqs::from_lengths(kLengths).with_loss_mask(testing::dvec(kMask));
}

// `x` with its environment positions replaced by `garbage`.
inline torch::Tensor spoil(const torch::Tensor& x, double garbage) {
  torch::Tensor out = x.clone();
  for (size_t t = 0; t < kMask.size(); ++t) {
    if (kMask[t] == 0) out[static_cast<int64_t>(t)] = garbage;
  }
  return out;
}

}  // namespace aspen::algo::masked_testing
