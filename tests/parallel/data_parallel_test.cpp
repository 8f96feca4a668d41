// GradientAllReducer and the global-sum helpers on a one-rank group (in process);
// the multi-rank behaviour is in distributed_test.cpp.
#include "aspen/parallel/data_parallel.h"

#include <gtest/gtest.h>

#include "aspen/parallel/launcher.h"

namespace aspen::parallel {
namespace {

ProcessGroupHandle single_rank_group() {
  DistEnv env;
  env.master_port = find_free_port();
  env.rendezvous_timeout = std::chrono::seconds(10);
  return init_process_group(env);
}

TEST(DataParallel, SingleRankSumsAreIdentity) {
  ProcessGroupHandle group = single_rank_group();
  EXPECT_EQ(group.world_size(), 1);
  EXPECT_EQ(all_reduce_sum(group, int64_t{1} << 40), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(all_reduce_sum(group, 0.1), 0.1);
}

TEST(DataParallel, BucketsFollowCapacityDtypeAndReverseOrder) {
  ProcessGroupHandle group = single_rank_group();
  NamedParams params = {
      {"a", torch::zeros({256}, torch::requires_grad())},                     // 1 KiB
      {"b", torch::zeros({256}, torch::requires_grad())},                     // 1 KiB
      {"frozen", torch::zeros({256})},                                        // skipped
      {"c", torch::zeros({128}, torch::dtype(torch::kFloat64).requires_grad(true))},  // 1 KiB
      {"d", torch::zeros({1024}, torch::requires_grad())},                    // 4 KiB
  };
  DataParallelOptions options;
  options.bucket_mb = 2.5 / 1024;  // 2.5 KiB
  GradientAllReducer reducer(group, params, options);
  // Trainable indices: a=0 b=1 c=2 d=3; reverse: d (alone, too big), c (fp64), b+a.
  const std::vector<std::vector<size_t>> expected = {{3}, {2}, {1, 0}};
  EXPECT_EQ(reducer.buckets(), expected);
}

TEST(DataParallel, AllReduceKeepsGradsAndFillsMissingOnes) {
  ProcessGroupHandle group = single_rank_group();
  torch::Tensor w = torch::ones({2, 3}, torch::requires_grad());
  torch::Tensor unused = torch::ones({4}, torch::requires_grad());
  NamedParams params = {{"w", w}, {"unused", unused}};
  DataParallelOptions options;
  options.scale = GradientScale::kMeanOverRanks;  // / 1 here
  GradientAllReducer reducer(group, params, options);
  (w * torch::arange(6).view({2, 3})).sum().backward();
  reducer.all_reduce();
  EXPECT_TRUE(torch::equal(w.grad(), torch::arange(6, torch::kFloat).view({2, 3})));
  ASSERT_TRUE(unused.grad().defined());
  EXPECT_TRUE(torch::equal(unused.grad(), torch::zeros({4})));
}

TEST(DataParallel, ArmedHooksLaunchDuringBackwardAndKeepAccumulatedGrads) {
  ProcessGroupHandle group = single_rank_group();
  torch::Tensor w = torch::ones({3}, torch::requires_grad());
  torch::Tensor v = torch::ones({2}, torch::requires_grad());
  torch::Tensor unused = torch::ones({2}, torch::requires_grad());
  NamedParams params = {{"w", w}, {"v", v}, {"unused", unused}};
  DataParallelOptions options;
  options.bucket_mb = 1e-6;  // one parameter per bucket
  GradientAllReducer reducer(group, params, options);
  ASSERT_EQ(reducer.buckets().size(), 3u);
  (2 * w).sum().backward();  // micro-batch 1: local accumulation only
  reducer.prepare_for_backward();
  (3 * w).sum().backward();  // micro-batch 2 (armed): w's bucket completes in the hook
  reducer.finish();
  // Buckets in launch order: unused (never seen), v (not in this graph), w: the hooks
  // could launch none, because bucket 0 (unused) only completes in finish().
  EXPECT_EQ(reducer.launched_during_backward(), 0u);
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({3}, 5.0)));
  EXPECT_TRUE(torch::equal(v.grad(), torch::zeros({2})));

  // With every parameter in the graph, all buckets launch from the hooks.
  for (auto* p : {&w, &v, &unused}) p->mutable_grad() = torch::Tensor();
  reducer.prepare_for_backward();
  (w.sum() + 2 * v.sum() + 4 * unused.sum()).backward();
  EXPECT_EQ(reducer.launched_during_backward(), 3u);
  reducer.finish();
  EXPECT_TRUE(torch::equal(unused.grad(), torch::full({2}, 4.0)));
  EXPECT_TRUE(torch::equal(v.grad(), torch::full({2}, 2.0)));
}

}  // namespace
}  // namespace aspen::parallel
