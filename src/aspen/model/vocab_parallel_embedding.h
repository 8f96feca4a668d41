// Vocab-parallel token embedding: each TP rank holds V/t rows of the embedding
// matrix; a rank looks up the ids it owns, contributes zeros for the others, and
// one all-reduce SUM (reduce_from_tp_region) gives every rank the full lookup.
//
// Shapes: T = tokens, C = hidden size, V = vocabulary, t = TP size.
//   ids [T] int64 in [0, V); weight_shard [V/t, C] = rows [vocab_begin,
//   vocab_begin + V/t) -> [T, C] in weight's dtype, identical on every rank.
// Backward: identity through the all-reduce (every rank already holds the full
// output gradient); a rank's rows receive the gradient of the tokens it owns only.
// With tp.size == 1 this is the plain lookup (vocab_begin must be 0), no collective.
// Thread safety and errors: as tp_collectives.h; ids are trusted (validated by the
// model's packed-batch check).
#pragma once

#include <torch/torch.h>

#include "aspen/model/imports.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight_shard,
                                       int64_t vocab_begin, const TensorParallel& tp);

}  // namespace aspen::model
