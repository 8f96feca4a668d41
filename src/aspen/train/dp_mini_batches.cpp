#include "aspen/train/dp_mini_batches.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "aspen/train/imports.h"
#include "aspen/train/mini_batches.h"
#include "aspen/util/error.h"

namespace aspen::train {

int64_t dp_steps_per_epoch(int64_t global_rows, int64_t mini_batch_size) {
  if (global_rows <= 0) return 0;
  if (mini_batch_size <= 0) return 1;
  return (global_rows + mini_batch_size - 1) / mini_batch_size;
}

std::vector<std::vector<int64_t>> dp_mini_batch_rows(int64_t local_rows, int64_t global_rows,
                                                     int64_t mini_batch_size, bool shuffle,
                                                     uint64_t seed, int64_t epoch) {
  check_input(local_rows >= 0 && local_rows <= global_rows,
              "this rank holds " + std::to_string(local_rows) + " of " +
                  std::to_string(global_rows) + " global rows",
              "data-parallel mini-batches");
  const int64_t steps = dp_steps_per_epoch(global_rows, mini_batch_size);
  std::vector<int64_t> order(static_cast<size_t>(local_rows));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) order = shuffled_rows(local_rows, seed + static_cast<uint64_t>(epoch));
  // M <= 0 means one step over everything (M = N); M > N is the same step. Capping M
  // at N keeps j * M * n <= 2 N^2, far from int64 overflow for any real batch.
  const int64_t size = mini_batch_size <= 0 ? global_rows : std::min(mini_batch_size, global_rows);
  auto bound = [&](int64_t j) { return std::min(local_rows, j * size * local_rows / global_rows); };
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(steps));
  for (int64_t j = 0; j < steps; ++j) {
    const int64_t begin = bound(j);
    const int64_t end = bound(j + 1);
    out.emplace_back(order.begin() + begin, order.begin() + end);
  }
  return out;
}

}  // namespace aspen::train
