#include "aspen/train/mini_batches.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "aspen/train/imports.h"

namespace aspen::train {

std::vector<int64_t> shuffled_rows(int64_t num_rows, uint64_t seed) {
  std::vector<int64_t> rows(static_cast<size_t>(std::max<int64_t>(num_rows, 0)));
  std::iota(rows.begin(), rows.end(), 0);
  std::mt19937_64 rng(seed);
  for (size_t i = rows.size(); i > 1; --i) {
    // Modulo bias is ~i / 2^64: irrelevant for a shuffle of a batch.
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(rows[i - 1], rows[j]);
  }
  return rows;
}

std::vector<std::vector<int64_t>> mini_batch_rows(int64_t num_rows, int64_t mini_batch_size,
                                                  bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(num_rows, 0)));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) order = shuffled_rows(num_rows, seed + static_cast<uint64_t>(epoch));
  const size_t size = mini_batch_size <= 0 ? std::max<size_t>(order.size(), 1)
                                           : static_cast<size_t>(mini_batch_size);
  std::vector<std::vector<int64_t>> out;
  for (size_t start = 0; start < order.size(); start += size) {
    const size_t end = std::min(order.size(), start + size);
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                     order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

}  // namespace aspen::train
