// How one tensor is split for tensor parallelism (Megatron-style), independent of
// any model: the full tensor is `blocks` equal blocks along `dim` (attention heads,
// kv heads, MLP columns, vocabulary rows), and TP rank r of t holds
//   blocks [r*blocks/t, (r+1)*blocks/t)   when blocks >= t (blocks % t == 0), or
//   block  r*blocks/t                     when blocks <  t (t % blocks == 0): the
//                                          block is REPLICATED on t/blocks ranks
//                                          (GQA with fewer kv heads than ranks).
// dim < 0 means the whole tensor is replicated on every rank (norm weights).
// The model states its layout per parameter (model/tp_layout.h); the TP layers,
// the resharder and sharded checkpoints all read it from there, so a layout change
// is one edit.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

struct ShardSpec {
  int64_t dim = -1;    // split dimension; < 0: replicated
  int64_t blocks = 1;  // equal blocks along dim

  bool replicated() const { return dim < 0; }
  bool operator==(const ShardSpec& other) const {
    return dim == other.dim && blocks == other.blocks;
  }
};

// [begin, begin + length) along spec.dim of a full extent `extent` held by TP rank
// `rank` of `size` (for a replicated spec: [0, extent)). aspen::Error naming `what`
// when extent is not a whole number of blocks or blocks and size do not divide.
struct ShardRange {
  int64_t begin = 0;
  int64_t length = 0;
};
ShardRange shard_range(const ShardSpec& spec, int64_t extent, int rank, int size,
                       const std::string& what);

// The shard of `full` held by rank/size (a view, narrow()ed along spec.dim).
torch::Tensor take_shard(const torch::Tensor& full, const ShardSpec& spec, int rank, int size,
                         const std::string& what);

// The full shape of a tensor whose rank-local shard has `shard_shape` at TP size `size`.
std::vector<int64_t> full_shape(const ShardSpec& spec, torch::IntArrayRef shard_shape, int size,
                                const std::string& what);

// True when some other rank of a TP group of `size` holds the same elements, so the
// gradients of those copies must be summed (replicated norms, replicated kv heads).
inline bool has_replicas(const ShardSpec& spec, int size) {
  return size > 1 && (spec.replicated() || spec.blocks < size);
}

// How many ranks of a TP group of `size` hold each element of a tensor with this
// layout: 1 for a true shard, size for a replicated tensor, size / blocks for a block
// replicated over several ranks.
inline int copies_of(const ShardSpec& spec, int size) {
  if (spec.replicated()) return size;
  return spec.blocks < size ? size / static_cast<int>(spec.blocks) : 1;
}

}  // namespace aspen::parallel
