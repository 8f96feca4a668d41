// Token-balanced partition of rows across d data-parallel ranks, so that no rank
// idles while another finishes a long tail (the skewness bubble).
// Algorithm: both LPT greedy (longest first onto the lightest rank) and multiway
// Karmarkar–Karp largest differencing are run; the partition with the smaller max
// load wins. Because LPT is one of the candidates, Graham's list-scheduling bound
// holds for the result:
//     max_load <= sum/d + (1 - 1/d) * max_item        (kTokenBalanceBound below)
// and LPT's 4/3 - 1/(3d) approximation of the optimum makespan. KK usually does
// better on many small items, LPT on few large ones.
// imbalance = max_load / mean_load - 1 (0 is perfect; 0 when there are no tokens).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/dock/imports.h"

namespace aspen::dock {

struct TokenPartition {
  std::vector<std::vector<int>> ranks;  // [rank] -> indices into the input weights
  std::vector<int64_t> loads;           // [rank] -> sum of weights
  double imbalance = 0.0;               // max/mean - 1
};

// The most ranks a claim may balance over: a bound on what a peer's claim options can
// make the controller allocate (one load per rank), far above any data-parallel size.
constexpr int kMaxBalanceRanks = 1 << 16;

// Partitions items with non-negative `weights` (token lengths) over `ranks` in
// [1, kMaxBalanceRanks].
// Every index appears in exactly one rank. Deterministic for equal inputs.
TokenPartition balance_by_tokens(const std::vector<int64_t>& weights, int ranks);

// Graham's bound on max load that balance_by_tokens guarantees.
double token_balance_bound(const std::vector<int64_t>& weights, int ranks);

}  // namespace aspen::dock
