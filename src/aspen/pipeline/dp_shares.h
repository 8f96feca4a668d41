// Splits one global TrainBatch into the local batches of d data-parallel ranks with
// the SAME token-balanced partition a dock claim with balance_ranks = d makes
// (dock/token_balance.h: balance_by_tokens over each row's RESPONSE token count, the
// row length the rollout stages report to the dock). Tests and benchmarks use it to
// give each rank of a data-parallel trainer (train/actor.h) what the dock would.
// It lives in pipeline because it joins dock (the partition) and train (the batch).
//
// Rank r's batch holds rows partition.ranks[r] sorted ascending (a canonical order; it
// only decides which local mini-batch a row lands in), columns re-packed
// (train/batch_rows.h). A rank may get no rows (fewer rows than ranks).
// Thread safety: pure functions. Errors: aspen::Error for ranks < 1 or a malformed batch.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/train/train_batch.h"

namespace aspen::pipeline {

// [rank] -> global row indices, ascending.
std::vector<std::vector<int64_t>> balanced_share_rows(const TrainBatch& batch, int ranks);

// [rank] -> that rank's local batch.
std::vector<TrainBatch> split_balanced(const TrainBatch& batch, int ranks);

}  // namespace aspen::pipeline
