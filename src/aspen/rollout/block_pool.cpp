#include "aspen/rollout/block_pool.h"

#include <c10/util/Exception.h>

#include "aspen/rollout/imports.h"

namespace aspen::rollout {

BlockPool::BlockPool(int64_t num_blocks)
    : ref_counts_(num_blocks, 0),
      free_prev_(num_blocks, -1),
      free_next_(num_blocks, -1),
      in_free_list_(num_blocks, 0),
      hash_of_block_(num_blocks) {
  TORCH_CHECK(num_blocks > 0, "BlockPool needs at least one block");
  for (BlockId b = 0; b < num_blocks; ++b) push_free_back(b);
}

void BlockPool::push_free_back(BlockId block) {
  free_prev_[block] = free_tail_;
  free_next_[block] = -1;
  if (free_tail_ >= 0)
    free_next_[free_tail_] = block;
  else
    free_head_ = block;
  free_tail_ = block;
  in_free_list_[block] = 1;
  ++free_count_;
}

void BlockPool::unlink_free(BlockId block) {
  TORCH_CHECK(in_free_list_[block], "block ", block, " is not free");
  const BlockId prev = free_prev_[block];
  const BlockId next = free_next_[block];
  if (prev >= 0)
    free_next_[prev] = next;
  else
    free_head_ = next;
  if (next >= 0)
    free_prev_[next] = prev;
  else
    free_tail_ = prev;
  in_free_list_[block] = 0;
  --free_count_;
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_head_ < 0) return std::nullopt;
  const BlockId block = free_head_;
  unlink_free(block);
  if (hash_of_block_[block]) {
    block_of_hash_.erase(*hash_of_block_[block]);
    hash_of_block_[block].reset();
  }
  ref_counts_[block] = 1;
  return block;
}

void BlockPool::retain(BlockId block) {
  if (ref_counts_.at(block) == 0) unlink_free(block);  // reviving a cached free block
  ++ref_counts_[block];
}

void BlockPool::release(BlockId block) {
  TORCH_CHECK(ref_counts_.at(block) > 0, "release of free block ", block);
  if (--ref_counts_[block] == 0) push_free_back(block);
}

BlockHash BlockPool::chain_hash(BlockHash parent, const TokenId* tokens, int64_t count) {
  // FNV-1a over the parent hash and the token ids, then a splitmix finaliser.
  uint64_t h = 1469598103934665603ULL ^ parent;
  for (int64_t i = 0; i < count; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ULL;
  }
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 29);
}

std::optional<BlockId> BlockPool::lookup(BlockHash hash) const {
  auto it = block_of_hash_.find(hash);
  if (it == block_of_hash_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::register_prefix(BlockId block, BlockHash hash) {
  if (hash_of_block_.at(block) || block_of_hash_.count(hash)) return;
  hash_of_block_[block] = hash;
  block_of_hash_[hash] = block;
}

void BlockPool::reset_prefix_cache() {
  block_of_hash_.clear();
  for (auto& hash : hash_of_block_) hash.reset();
}

}  // namespace aspen::rollout
