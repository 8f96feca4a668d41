// The tensor-parallel context and its collectives without tensor parallelism
// (size 1): no group, nothing recorded, the input itself returned. The multi-rank
// behaviour is pinned by the tp_collectives worker mode (tensor_parallel_test.cpp).
#include "aspen/parallel/tp_collectives.h"

#include <gtest/gtest.h>

#include <string>

#include "aspen/parallel/launcher.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

TEST(TpCollectives, SizeOneIsTheIdentityWithoutAGroup) {
  const TensorParallel tp;
  EXPECT_FALSE(tp.enabled());
  EXPECT_NO_THROW(tp.validate("tp"));
  torch::Tensor x = torch::randn({2, 3}, torch::requires_grad());
  EXPECT_TRUE(copy_to_tp_region(x, tp).is_same(x));
  EXPECT_TRUE(reduce_from_tp_region(x, tp).is_same(x));
  EXPECT_TRUE(sum_replica_grads(x, ShardSpec{}, tp).is_same(x));
  EXPECT_TRUE(sum_replica_grads(x, ShardSpec{0, 2}, tp).is_same(x));
}

TEST(TpCollectives, OverAOneRankGroupIsSizeOne) {
  DistEnv env;
  env.master_port = find_free_port();
  env.rendezvous_timeout = std::chrono::seconds(10);
  const TensorParallel tp = TensorParallel::over(init_process_group(env));
  EXPECT_EQ(tp.size, 1);
  EXPECT_EQ(tp.rank, 0);
  EXPECT_FALSE(tp.group.has_value());
}

TEST(TpCollectives, InconsistentContextsAreErrors) {
  TensorParallel no_group;
  no_group.size = 2;
  EXPECT_THROW(no_group.validate("tp"), Error);
  EXPECT_THROW(no_group.require_group("tp"), Error);
  TensorParallel bad_rank;
  bad_rank.rank = 1;
  try {
    bad_rank.validate("tp context");
    FAIL() << "rank 1 of 1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TP rank 1 is not in [0, 1)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aspen::parallel
