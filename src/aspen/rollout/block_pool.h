// BlockPool: the metadata of a paged KV cache — which blocks are free, how many
// sequences hold each block, and which full blocks hold a known token prefix.
// The KV tensors themselves live in KvCache; this class never touches them.
//
// Reference counts: a block is held by every sequence whose block table lists it
// (the n samples of one prompt share its full prompt blocks). A block whose count
// drops to 0 returns to the free list; if it holds a cached prefix it stays
// findable by hash until it is handed out again (evicted least recently freed
// first), as in vLLM's prefix cache.
//
// Prefix hashes chain: hash(block i) = H(hash(block i-1), tokens of block i), so
// one lookup per block finds the longest cached prefix. reset_prefix_cache()
// forgets every hash (called whenever the weights change: cached KV computed by
// old weights must not serve new requests); blocks in use stay valid for their
// current holders.
//
// Thread safety: none; the owning engine serialises access.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "aspen/rollout/imports.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::rollout {

using BlockId = int32_t;
using BlockHash = uint64_t;

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t num_free() const { return free_count_; }

  // Takes a free block (evicting its cached prefix, if any) with count 1.
  // nullopt when none is free.
  std::optional<BlockId> allocate();
  // Adds a holder (sharing a block between sequences or reusing a cached one).
  void retain(BlockId block);
  // Drops a holder; at 0 the block is free again (still findable if cached).
  void release(BlockId block);
  int32_t ref_count(BlockId block) const { return ref_counts_.at(block); }

  // Chain hash of a full block of `tokens` that follows a prefix hashed `parent`
  // (parent of the first block: kNoParent).
  static constexpr BlockHash kNoParent = 0x9E3779B97F4A7C15ULL;
  static BlockHash chain_hash(BlockHash parent, const TokenId* tokens, int64_t count);

  // The block holding the prefix `hash`, if cached. Does not retain it.
  std::optional<BlockId> lookup(BlockHash hash) const;
  // Records that full block `block` holds the prefix `hash` (first writer wins).
  void register_prefix(BlockId block, BlockHash hash);
  void reset_prefix_cache();
  int64_t num_cached() const { return static_cast<int64_t>(block_of_hash_.size()); }

 private:
  void unlink_free(BlockId block);
  void push_free_back(BlockId block);

  std::vector<int32_t> ref_counts_;
  // Free list as an intrusive doubly linked list so a cached free block can be
  // revived from the middle in O(1). -1 terminates.
  std::vector<BlockId> free_prev_, free_next_;
  std::vector<char> in_free_list_;
  BlockId free_head_ = -1, free_tail_ = -1;
  int64_t free_count_ = 0;
  std::vector<std::optional<BlockHash>> hash_of_block_;
  std::unordered_map<BlockHash, BlockId> block_of_hash_;
};

}  // namespace aspen::rollout
