// Building one rank's shard of a tensor from other ranks' shards of it, in any two
// TP layouts (parallel/shard_spec.h). The resharder (training -> inference layout)
// and sharded checkpoints (saved layout -> loading layout) both reduce to this:
// the target range along the split dim is covered by the source ranges, and each
// overlap is copied once.
// Thread safety: pure functions.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/shard_spec.h"

namespace aspen::parallel {

// A shard held by TP rank `rank` of a layout of `size` ranks.
struct SourceShard {
  torch::Tensor tensor;
  int rank = 0;
  int size = 1;
};

// The target rank's shard (target_rank of target_size) of the tensor whose full
// shape is `full`, in `dtype`, copied from `sources` (any order; duplicates of a
// replicated block are fine). aspen::Error naming `what` when a source has the wrong
// shape for its rank or the sources leave part of the target uncovered.
torch::Tensor assemble_shard(const ShardSpec& spec, torch::IntArrayRef full,
                             const std::vector<SourceShard>& sources, int target_rank,
                             int target_size, torch::ScalarType dtype, const std::string& what);

// Source ranks (of source_size) whose shard overlaps the target's shard; every one
// of them is needed unless it duplicates a replicated block another already covers,
// so the result lists each distinct range once (lowest rank first).
std::vector<int> source_ranks_needed(const ShardSpec& spec, int64_t extent, int target_rank,
                                     int target_size, int source_size, const std::string& what);

}  // namespace aspen::parallel
