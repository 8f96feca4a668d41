#include "aspen/dock/token_balance.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

void finish(TokenPartition& partition, const std::vector<int64_t>& weights) {
  partition.loads.assign(partition.ranks.size(), 0);
  for (size_t r = 0; r < partition.ranks.size(); ++r) {
    for (int i : partition.ranks[r]) partition.loads[r] += weights[i];
  }
  const int64_t total = std::accumulate(partition.loads.begin(), partition.loads.end(), int64_t{0});
  const int64_t max_load = *std::max_element(partition.loads.begin(), partition.loads.end());
  const double mean = static_cast<double>(total) / static_cast<double>(partition.ranks.size());
  partition.imbalance = total > 0 ? static_cast<double>(max_load) / mean - 1.0 : 0.0;
}

std::vector<int> by_weight_descending(const std::vector<int64_t>& weights) {
  std::vector<int> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return weights[a] > weights[b]; });
  return order;
}

TokenPartition lpt(const std::vector<int64_t>& weights, int ranks) {
  TokenPartition partition;
  partition.ranks.resize(ranks);
  std::vector<int64_t> loads(ranks, 0);
  for (int i : by_weight_descending(weights)) {
    const int lightest =
        static_cast<int>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    partition.ranks[lightest].push_back(i);
    loads[lightest] += weights[i];
  }
  finish(partition, weights);
  return partition;
}

// Multiway largest differencing: every item starts as a d-tuple (item, 0, ..., 0);
// repeatedly merge the two tuples with the largest spread, pairing the heaviest
// subset of one with the lightest of the other, until one tuple is left.
struct Tuple {
  std::vector<int64_t> sums;            // sorted descending
  std::vector<std::vector<int>> items;  // parallel to sums
  int64_t spread() const { return sums.front() - sums.back(); }
};

TokenPartition karmarkar_karp(const std::vector<int64_t>& weights, int ranks) {
  auto less_spread = [](const Tuple& a, const Tuple& b) { return a.spread() < b.spread(); };
  std::priority_queue<Tuple, std::vector<Tuple>, decltype(less_spread)> heap(less_spread);
  for (size_t i = 0; i < weights.size(); ++i) {
    Tuple tuple{std::vector<int64_t>(ranks, 0), std::vector<std::vector<int>>(ranks)};
    tuple.sums[0] = weights[i];
    tuple.items[0].push_back(static_cast<int>(i));
    heap.push(std::move(tuple));
  }
  while (heap.size() > 1) {
    Tuple a = heap.top();
    heap.pop();
    Tuple b = heap.top();
    heap.pop();
    Tuple merged{std::vector<int64_t>(ranks), std::vector<std::vector<int>>(ranks)};
    std::vector<int> order(ranks);
    for (int k = 0; k < ranks; ++k) {
      merged.sums[k] = a.sums[k] + b.sums[ranks - 1 - k];
      merged.items[k] = a.items[k];
      const auto& tail = b.items[ranks - 1 - k];
      merged.items[k].insert(merged.items[k].end(), tail.begin(), tail.end());
      order[k] = k;
    }
    std::sort(order.begin(), order.end(),
              [&](int x, int y) { return merged.sums[x] > merged.sums[y]; });
    Tuple sorted{std::vector<int64_t>(ranks), std::vector<std::vector<int>>(ranks)};
    for (int k = 0; k < ranks; ++k) {
      sorted.sums[k] = merged.sums[order[k]];
      sorted.items[k] = std::move(merged.items[order[k]]);
    }
    heap.push(std::move(sorted));
  }
  TokenPartition partition;
  partition.ranks.resize(ranks);
  if (!heap.empty()) partition.ranks = heap.top().items;
  finish(partition, weights);
  return partition;
}

}  // namespace

TokenPartition balance_by_tokens(const std::vector<int64_t>& weights, int ranks) {
  check_input(ranks >= 1 && ranks <= kMaxBalanceRanks,
              "balance across " + std::to_string(ranks) + " ranks", "claim option balance_ranks",
              "use 1 to " + std::to_string(kMaxBalanceRanks) + " ranks");
  for (int64_t w : weights) {
    check_input(w >= 0, "negative token length " + std::to_string(w), "row tokens");
  }
  TokenPartition greedy = lpt(weights, ranks);
  if (ranks == 1 || weights.size() <= static_cast<size_t>(ranks)) return greedy;
  TokenPartition differencing = karmarkar_karp(weights, ranks);
  const auto max_of = [](const TokenPartition& p) {
    return *std::max_element(p.loads.begin(), p.loads.end());
  };
  return max_of(differencing) < max_of(greedy) ? differencing : greedy;
}

double token_balance_bound(const std::vector<int64_t>& weights, int ranks) {
  if (weights.empty()) return 0.0;
  const double total =
      static_cast<double>(std::accumulate(weights.begin(), weights.end(), int64_t{0}));
  const double largest = static_cast<double>(*std::max_element(weights.begin(), weights.end()));
  return total / ranks + (1.0 - 1.0 / ranks) * largest;
}

}  // namespace aspen::dock
