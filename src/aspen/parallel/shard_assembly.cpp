#include "aspen/parallel/shard_assembly.h"

#include <algorithm>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

struct Overlap {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
};

Overlap intersect(const ShardRange& a, const ShardRange& b) {
  return {std::max(a.begin, b.begin), std::min(a.begin + a.length, b.begin + b.length)};
}

std::string shape_text(torch::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

torch::Tensor assemble_shard(const ShardSpec& spec, torch::IntArrayRef full,
                             const std::vector<SourceShard>& sources, int target_rank,
                             int target_size, torch::ScalarType dtype, const std::string& what) {
  check_input(!sources.empty(), "no source shards", what);
  if (spec.replicated()) {
    const SourceShard& source = sources.front();
    check_input(source.tensor.sizes() == full,
                "replicated source has shape " + shape_text(source.tensor.sizes()) +
                    ", expected " + shape_text(full),
                what);
    return source.tensor.to(dtype).clone();
  }
  const int64_t extent = full[static_cast<size_t>(spec.dim)];
  const ShardRange target = shard_range(spec, extent, target_rank, target_size, what);
  std::vector<int64_t> shape(full.begin(), full.end());
  shape[static_cast<size_t>(spec.dim)] = target.length;
  torch::Tensor out = torch::empty(shape, sources.front().tensor.options().dtype(dtype));
  // Coverage bookkeeping along the split dim: which target positions were written.
  std::vector<char> covered(static_cast<size_t>(target.length), 0);
  for (const SourceShard& source : sources) {
    const ShardRange range = shard_range(spec, extent, source.rank, source.size, what);
    std::vector<int64_t> expected(full.begin(), full.end());
    expected[static_cast<size_t>(spec.dim)] = range.length;
    check_input(source.tensor.sizes() == torch::IntArrayRef(expected),
                "shard of rank " + std::to_string(source.rank) + "/" +
                    std::to_string(source.size) + " has shape " +
                    shape_text(source.tensor.sizes()) + ", expected " + shape_text(expected),
                what);
    const Overlap overlap = intersect(range, target);
    if (overlap.empty()) continue;
    const int64_t n = overlap.end - overlap.begin;
    out.narrow(spec.dim, overlap.begin - target.begin, n)
        .copy_(source.tensor.narrow(spec.dim, overlap.begin - range.begin, n));
    std::fill(covered.begin() + (overlap.begin - target.begin),
              covered.begin() + (overlap.end - target.begin), 1);
  }
  const auto hole = std::find(covered.begin(), covered.end(), 0);
  check_input(hole == covered.end(),
              "the source shards do not cover position " +
                  std::to_string(target.begin + (hole - covered.begin())) + " along dim " +
                  std::to_string(spec.dim) + " of the target shard",
              what);
  return out;
}

std::vector<int> source_ranks_needed(const ShardSpec& spec, int64_t extent, int target_rank,
                                     int target_size, int source_size, const std::string& what) {
  if (spec.replicated()) return {0};
  const ShardRange target = shard_range(spec, extent, target_rank, target_size, what);
  std::vector<int> ranks;
  std::vector<int64_t> seen_begins;
  for (int r = 0; r < source_size; ++r) {
    const ShardRange range = shard_range(spec, extent, r, source_size, what);
    if (intersect(range, target).empty()) continue;
    if (std::find(seen_begins.begin(), seen_begins.end(), range.begin) != seen_begins.end()) {
      continue;  // a replica of a block already listed
    }
    seen_begins.push_back(range.begin);
    ranks.push_back(r);
  }
  return ranks;
}

}  // namespace aspen::parallel
