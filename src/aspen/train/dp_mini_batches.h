// Mini-batch schedule of one data-parallel rank: which of ITS rows each optimizer step
// trains on, so that every rank takes the same number of steps.
//
// A global batch of N rows split over ranks (each holds n_r rows, sum n_r = N) with a
// GLOBAL mini-batch size M takes S = ceil(N / M) steps per epoch (1 when M <= 0, 0 when
// N = 0), on every rank. Rank r's step j trains its local rows in positions
//     [min(n_r, floor(j * M * n_r / N)), min(n_r, floor((j + 1) * M * n_r / N)))
// of its (optionally shuffled) local order: its proportional share M * n_r / N of each
// global mini-batch, so the union over ranks has about M rows. A local step may be
// empty (a rank with fewer rows than steps); the rank must still join the step's
// collectives. With one rank (n_r = N) this is exactly mini_batch_rows(): chunks of M.
// Shuffling is local (seed + epoch, as mini_batches.h): which global mini-batch a row
// lands in depends on its rank's share, not on a global permutation no rank holds.
// Thread safety: pure functions. Errors: aspen::Error for local_rows outside [0, N].
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/train/imports.h"

namespace aspen::train {

// S above: the optimizer steps per epoch every rank takes.
int64_t dp_steps_per_epoch(int64_t global_rows, int64_t mini_batch_size);

// Exactly dp_steps_per_epoch(global_rows, mini_batch_size) lists of local row indices.
std::vector<std::vector<int64_t>> dp_mini_batch_rows(int64_t local_rows, int64_t global_rows,
                                                     int64_t mini_batch_size, bool shuffle,
                                                     uint64_t seed, int64_t epoch);

}  // namespace aspen::train
