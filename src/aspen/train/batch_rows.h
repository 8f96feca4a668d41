// A TrainBatch made of some rows of another: how a data-parallel rank's local batch
// (or any sub-batch) is cut out of a global one.
// select_rows(batch, rows): rows in the given order (repeats allowed), prompts and
// responses copied, token columns [R] re-packed to the selected rows' responses, row
// columns [B] gathered. Tensors stay on their device and dtype.
// Thread safety: pure function. Errors: aspen::Error for a row index out of range or a
// malformed input batch (TrainBatch::validate).
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/train/imports.h"
#include "aspen/train/train_batch.h"

namespace aspen::train {

TrainBatch select_rows(const TrainBatch& batch, const std::vector<int64_t>& rows);

}  // namespace aspen::train
