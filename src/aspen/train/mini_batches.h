// Mini-batch schedule: which rows each optimizer step of an epoch trains on.
//
// Rows 0..n-1 are (optionally) shuffled with a seeded Fisher-Yates driven by
// std::mt19937_64 (whose output sequence the standard fixes, unlike the
// distributions), reseeded per epoch as seed + epoch, so a run is reproducible on
// every platform; then cut into consecutive chunks of mini_batch_size rows (the last
// one may be smaller). mini_batch_size <= 0 means one mini-batch of every row.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/train/imports.h"

namespace aspen::train {

std::vector<int64_t> shuffled_rows(int64_t num_rows, uint64_t seed);

std::vector<std::vector<int64_t>> mini_batch_rows(int64_t num_rows, int64_t mini_batch_size,
                                                  bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace aspen::train
