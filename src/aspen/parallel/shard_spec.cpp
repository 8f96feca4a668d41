#include "aspen/parallel/shard_spec.h"

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

ShardRange shard_range(const ShardSpec& spec, int64_t extent, int rank, int size,
                       const std::string& what) {
  check_input(size >= 1 && rank >= 0 && rank < size,
              "TP rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")",
              what);
  if (spec.replicated()) return {0, extent};
  check_input(spec.blocks >= 1 && extent % spec.blocks == 0,
              "extent " + std::to_string(extent) + " along dim " + std::to_string(spec.dim) +
                  " is not a whole number of " + std::to_string(spec.blocks) + " blocks",
              what);
  const int64_t block = extent / spec.blocks;
  if (spec.blocks >= size) {
    check_input(spec.blocks % size == 0,
                std::to_string(spec.blocks) + " blocks cannot be split evenly over TP size " +
                    std::to_string(size),
                what);
    const int64_t per_rank = spec.blocks / size;
    return {rank * per_rank * block, per_rank * block};
  }
  check_input(size % spec.blocks == 0,
              "TP size " + std::to_string(size) + " is not a multiple of its " +
                  std::to_string(spec.blocks) + " blocks (replication needs an even split)",
              what);
  return {(static_cast<int64_t>(rank) * spec.blocks / size) * block, block};
}

torch::Tensor take_shard(const torch::Tensor& full, const ShardSpec& spec, int rank, int size,
                         const std::string& what) {
  if (spec.replicated()) return full;
  check_input(spec.dim < full.dim(), "split dim " + std::to_string(spec.dim) +
                                         " does not exist in a " + std::to_string(full.dim()) +
                                         "-d tensor",
              what);
  const ShardRange range = shard_range(spec, full.size(spec.dim), rank, size, what);
  return full.narrow(spec.dim, range.begin, range.length);
}

std::vector<int64_t> full_shape(const ShardSpec& spec, torch::IntArrayRef shard_shape, int size,
                                const std::string& what) {
  std::vector<int64_t> shape(shard_shape.begin(), shard_shape.end());
  if (spec.replicated() || size == 1) return shape;
  check_input(spec.dim < static_cast<int64_t>(shape.size()),
              "split dim " + std::to_string(spec.dim) + " does not exist in the shard", what);
  // blocks >= size: each rank holds blocks/size blocks; blocks < size: one block.
  const int64_t factor = spec.blocks >= size ? size : spec.blocks;
  shape[static_cast<size_t>(spec.dim)] *= factor;
  return shape;
}

}  // namespace aspen::parallel
