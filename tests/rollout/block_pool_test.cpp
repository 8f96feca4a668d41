#include "aspen/rollout/block_pool.h"

#include <gtest/gtest.h>

namespace aspen::rollout {
namespace {

TEST(BlockPool, AllocatesUntilEmptyAndReturnsReleasedBlocks) {
  BlockPool pool(3);
  auto a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.num_free(), 0);
  pool.release(*b);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.allocate(), b);
}

TEST(BlockPool, SharedBlockIsFreedByItsLastHolder) {
  BlockPool pool(2);
  const BlockId block = *pool.allocate();
  pool.retain(block);
  EXPECT_EQ(pool.ref_count(block), 2);
  pool.release(block);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(block);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPool, CachedFreeBlockCanBeRevivedUntilEvicted) {
  BlockPool pool(2);
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const BlockHash hash = BlockPool::chain_hash(BlockPool::kNoParent, tokens.data(), 4);
  const BlockId block = *pool.allocate();
  pool.register_prefix(block, hash);
  pool.release(block);
  ASSERT_EQ(pool.lookup(hash), block);
  pool.retain(block);  // revive: leaves the free list
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(block);
  // Evicted least-recently-freed first: the never-used block goes before it.
  const BlockId other = *pool.allocate();
  EXPECT_NE(other, block);
  EXPECT_EQ(pool.lookup(hash), block);
  EXPECT_EQ(*pool.allocate(), block);  // now it is handed out and forgotten
  EXPECT_FALSE(pool.lookup(hash).has_value());
}

TEST(BlockPool, ChainHashDependsOnParentAndTokens) {
  const std::vector<TokenId> t = {5, 6};
  const BlockHash root = BlockPool::chain_hash(BlockPool::kNoParent, t.data(), 2);
  EXPECT_NE(root, BlockPool::chain_hash(root, t.data(), 2));
  const std::vector<TokenId> u = {6, 5};
  EXPECT_NE(root, BlockPool::chain_hash(BlockPool::kNoParent, u.data(), 2));
}

TEST(BlockPool, ResetForgetsEveryPrefix) {
  BlockPool pool(2);
  const BlockId block = *pool.allocate();
  pool.register_prefix(block, 42);
  pool.reset_prefix_cache();
  EXPECT_FALSE(pool.lookup(42).has_value());
  EXPECT_EQ(pool.ref_count(block), 1);
}

}  // namespace
}  // namespace aspen::rollout
