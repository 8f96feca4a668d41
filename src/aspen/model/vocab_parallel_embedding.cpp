#include "aspen/model/vocab_parallel_embedding.h"

#include "aspen/model/imports.h"
#include "aspen/parallel/tp_collectives.h"

namespace aspen::model {

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight_shard,
                                       int64_t vocab_begin, const TensorParallel& tp) {
  namespace F = torch::nn::functional;
  if (!tp.enabled()) {
    TORCH_CHECK(vocab_begin == 0, "vocab_parallel_embedding: vocab_begin ", vocab_begin,
                " without tensor parallelism");
    return F::embedding(ids, weight_shard);
  }
  const int64_t rows = weight_shard.size(0);
  torch::Tensor local = ids - vocab_begin;
  torch::Tensor foreign = (local < 0) | (local >= rows);
  // Foreign ids look up row 0 and are zeroed; masked_fill also zeroes their gradient,
  // so row 0 receives nothing from tokens this rank does not own.
  torch::Tensor rows_out = F::embedding(local.masked_fill(foreign, 0), weight_shard);
  return reduce_from_tp_region(rows_out.masked_fill(foreign.unsqueeze(1), 0.0), tp);
}

}  // namespace aspen::model
