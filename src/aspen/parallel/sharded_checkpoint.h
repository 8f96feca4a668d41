// Sharded checkpoints: every TP rank writes only its own shards; a checkpoint loads
// into any other TP layout (and merges into an HF-layout directory).
//
// Directory format ("aspen-sharded-v1"):
//   DIR/layout.json    {"format": "aspen-sharded-v1", "tp_size": T,
//                       "tensors": [{"name", "dim", "blocks", "full_shape"}, ...]}
//                      (tensor order = save order; written by TP rank 0)
//   DIR/tp-R-of-T.safetensors   TP rank R's shards, names as given
// Only one DP replica (dp_rank 0) writes: the replicas hold identical shards.
//
// save_sharded is called by every rank of one TP group (collectively in spirit:
// the checkpoint is complete once all T files exist; callers barrier before
// declaring it done). Each file is written atomically (temp file + rename).
// load_sharded reads layout.json, maps only the files that hold part of the
// requested rank's shards (mmap, zero-copy), and assembles them (shard_assembly.h):
// a checkpoint written at TP 2 loads at TP 1, 4, ... exactly. The per-tensor
// overload lets a caller hold some tensors split another way than they were saved
// (an MoE expert saved TP-split, held whole by an expert-parallel rank) or skip them.
// Errors: aspen::Error naming the directory/file and the problem (missing or
// malformed layout.json, a missing shard file, a tensor absent from a shard file,
// a shard whose shape does not match the layout).
// Thread safety: independent calls may run concurrently on different directories.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/shard_spec.h"

namespace aspen::parallel {

struct ShardedTensor {
  std::string name;
  torch::Tensor shard;  // this rank's shard
  ShardSpec spec;
};

void save_sharded(const std::string& dir, const std::vector<ShardedTensor>& tensors, int tp_rank,
                  int tp_size, int dp_rank = 0);

// Every tensor of the checkpoint, as TP rank `tp_rank` of `tp_size` holds it, in
// save order; dtypes as saved.
std::vector<std::pair<std::string, torch::Tensor>> load_sharded(const std::string& dir,
                                                                int tp_rank, int tp_size);

// How a loading rank holds one tensor: its shard under `spec` as TP rank `rank` of
// `size` (size 1: the whole tensor, whatever the spec).
struct ShardHolding {
  ShardSpec spec;
  int rank = 0;
  int size = 1;
};

// The tensors of the checkpoint as `holding(name, spec it was saved with)` says this
// rank holds them, in save order; nullopt skips the tensor (no file is read for it). A tensor
// held under the spec it was saved with reads only the overlapping shards; one held
// under another spec is assembled whole and then split (take_shard, copied).
std::vector<std::pair<std::string, torch::Tensor>> load_sharded(
    const std::string& dir,
    const std::function<std::optional<ShardHolding>(const std::string& name,
                                                    const ShardSpec& saved)>& holding);

// The TP size a checkpoint was written at.
int sharded_tp_size(const std::string& dir);

}  // namespace aspen::parallel
