// ShardSpec arithmetic: which slice each TP rank holds (split, replicated blocks,
// whole-tensor replication), the inverse full_shape, and the errors for layouts
// that do not divide.
#include "aspen/parallel/shard_spec.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

std::string error_from(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ShardSpec, SplitBlocksGiveEachRankAContiguousRange) {
  const ShardSpec heads{0, 4};  // 4 heads of 8 rows each
  for (int rank = 0; rank < 2; ++rank) {
    const ShardRange r = shard_range(heads, 32, rank, 2, "q_proj");
    EXPECT_EQ(r.begin, rank * 16);
    EXPECT_EQ(r.length, 16);
  }
  const ShardRange one = shard_range(heads, 32, 3, 4, "q_proj");
  EXPECT_EQ(one.begin, 24);
  EXPECT_EQ(one.length, 8);
}

TEST(ShardSpec, FewerBlocksThanRanksReplicateEachBlock) {
  const ShardSpec kv{0, 2};  // 2 kv heads of 8 rows over 4 ranks: ranks {0,1} {2,3}
  const int64_t expected_begin[] = {0, 0, 8, 8};
  for (int rank = 0; rank < 4; ++rank) {
    const ShardRange r = shard_range(kv, 16, rank, 4, "k_proj");
    EXPECT_EQ(r.begin, expected_begin[rank]) << "rank " << rank;
    EXPECT_EQ(r.length, 8);
  }
  EXPECT_TRUE(has_replicas(kv, 4));
  EXPECT_FALSE(has_replicas(kv, 2));
  EXPECT_FALSE(has_replicas(kv, 1));
}

TEST(ShardSpec, ReplicatedSpecIsTheWholeTensorEverywhere) {
  const ShardSpec norm;
  EXPECT_TRUE(norm.replicated());
  const ShardRange r = shard_range(norm, 12, 1, 2, "norm");
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.length, 12);
  torch::Tensor w = torch::arange(12.0);
  EXPECT_TRUE(take_shard(w, norm, 1, 2, "norm").is_same(w));
  EXPECT_TRUE(has_replicas(norm, 2));
  EXPECT_FALSE(has_replicas(norm, 1));
}

TEST(ShardSpec, TakeShardNarrowsAlongTheSplitDim) {
  torch::Tensor w = torch::arange(24.0).view({4, 6});
  // Row-parallel: columns split into 3 blocks of 2 over 3 ranks.
  torch::Tensor shard = take_shard(w, ShardSpec{1, 3}, 1, 3, "o_proj");
  EXPECT_TRUE(torch::equal(shard, w.narrow(1, 2, 2)));
  EXPECT_EQ(shard.data_ptr(), w.narrow(1, 2, 2).data_ptr()) << "a view, not a copy";
  // Replicated block: ranks 2 and 3 of 4 both hold the second of 2 row blocks.
  EXPECT_TRUE(torch::equal(take_shard(w, ShardSpec{0, 2}, 3, 4, "k_proj"), w.narrow(0, 2, 2)));
}

TEST(ShardSpec, FullShapeInvertsTakeShard) {
  const torch::Tensor w = torch::zeros({8, 6});
  for (const ShardSpec spec : {ShardSpec{0, 4}, ShardSpec{1, 3}, ShardSpec{0, 2}, ShardSpec{}}) {
    for (int size : {1, 2, 4}) {
      if (spec.dim == 1 && size != 1 && 3 % size != 0) continue;
      const torch::Tensor shard = take_shard(w, spec, size - 1, size, "w");
      EXPECT_EQ(full_shape(spec, shard.sizes(), size, "w"), w.sizes().vec())
          << "dim " << spec.dim << " blocks " << spec.blocks << " size " << size;
    }
  }
}

std::string range_error(ShardSpec spec, int64_t extent, int rank, int size) {
  return error_from([&] { shard_range(spec, extent, rank, size, "q_proj"); });
}

TEST(ShardSpec, ErrorsNameTheTensorAndTheMismatch) {
  EXPECT_NE(range_error({0, 3}, 32, 0, 2).find("not a whole number of 3 blocks"),
            std::string::npos);
  const std::string uneven = range_error({0, 6}, 36, 0, 4);
  EXPECT_NE(uneven.find("6 blocks cannot be split evenly over TP size 4"), std::string::npos)
      << uneven;
  EXPECT_NE(uneven.find("q_proj"), std::string::npos) << uneven;
  EXPECT_NE(range_error({0, 2}, 16, 0, 3).find("TP size 3 is not a multiple of its 2 blocks"),
            std::string::npos);
  EXPECT_NE(range_error({0, 2}, 16, 2, 2).find("TP rank 2 is not in [0, 2)"), std::string::npos);
  const std::string no_dim = error_from([] {
    take_shard(torch::zeros({4}), ShardSpec{1, 2}, 0, 2, "bias");
  });
  EXPECT_NE(no_dim.find("split dim 1 does not exist"), std::string::npos) << no_dim;
}

}  // namespace
}  // namespace aspen::parallel
