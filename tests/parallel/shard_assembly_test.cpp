// assemble_shard / source_ranks_needed / Resharder in one process, against slicing
// the full tensor (take_shard) as the reference.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "aspen/parallel/resharder.h"
#include "aspen/parallel/shard_assembly.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

std::vector<SourceShard> all_shards(const torch::Tensor& full, const ShardSpec& spec, int size) {
  std::vector<SourceShard> shards;
  for (int r = 0; r < size; ++r) shards.push_back({take_shard(full, spec, r, size, "t"), r, size});
  return shards;
}

struct Case {
  ShardSpec spec;
  int from;
  int to;
};

TEST(ShardAssembly, EveryTargetShardEqualsTheSliceOfTheFullTensor) {
  torch::manual_seed(0);
  const torch::Tensor full = torch::randn({8, 6});
  const std::vector<Case> cases = {
      {{0, 8}, 2, 1}, {{0, 8}, 1, 2}, {{0, 8}, 2, 4}, {{0, 8}, 4, 2}, {{1, 3}, 1, 3},
      {{0, 2}, 4, 1},  // 2 blocks on 4 ranks: each block replicated twice
      {{0, 2}, 1, 4}, {{0, 1}, 2, 4}, {{-1, 1}, 2, 1}};
  for (const Case& c : cases) {
    for (int target = 0; target < c.to; ++target) {
      const torch::Tensor got = assemble_shard(c.spec, full.sizes(), all_shards(full, c.spec, c.from),
                                               target, c.to, torch::kFloat, "t");
      EXPECT_TRUE(torch::equal(got, take_shard(full, c.spec, target, c.to, "t")))
          << "dim " << c.spec.dim << " blocks " << c.spec.blocks << " " << c.from << " -> "
          << c.to << " target " << target;
    }
  }
}

TEST(ShardAssembly, CastsToTheTargetDtype) {
  const torch::Tensor full = torch::arange(8, torch::kFloat).view({4, 2}) / 3;
  const torch::Tensor got = assemble_shard({0, 4}, full.sizes(), all_shards(full, {0, 4}, 2), 0,
                                           1, torch::kBFloat16, "t");
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(got, full.to(torch::kBFloat16)));
}

TEST(ShardAssembly, MissingSourceIsAnErrorNamingThePosition) {
  const torch::Tensor full = torch::randn({4, 2});
  auto shards = all_shards(full, {0, 4}, 2);
  shards.pop_back();
  try {
    assemble_shard({0, 4}, full.sizes(), shards, 0, 1, torch::kFloat, "layers.0.w");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not cover position 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layers.0.w"), std::string::npos) << e.what();
  }
}

TEST(ShardAssembly, WrongShardShapeIsAnError) {
  const torch::Tensor full = torch::randn({4, 2});
  std::vector<SourceShard> shards = {{full, 0, 2}};  // the whole tensor claimed as rank 0 of 2
  EXPECT_THROW(assemble_shard({0, 4}, full.sizes(), shards, 0, 1, torch::kFloat, "w"), Error);
}

TEST(ShardAssembly, SourceRanksNeededSkipsReplicas) {
  // 2 kv heads on 4 training ranks: ranks {0,1} hold head 0, {2,3} head 1.
  EXPECT_EQ(source_ranks_needed({0, 2}, 8, 0, 1, 4, "k"), (std::vector<int>{0, 2}));
  EXPECT_EQ(source_ranks_needed({0, 8}, 8, 1, 2, 4, "q"), (std::vector<int>{2, 3}));
  EXPECT_EQ(source_ranks_needed({-1, 1}, 8, 0, 1, 4, "norm"), (std::vector<int>{0}));
}

TEST(Resharder, OneProcessCastsAndStampsTheVersion) {
  ReshardPlan plan;  // 1 x 1 -> 1, bf16
  Resharder resharder(std::nullopt, plan, [](const std::string&) { return ShardSpec{0, 2}; });
  const torch::Tensor w = torch::randn({4, 3});
  const auto set = resharder.reshard({{"w", w}}, 7);
  EXPECT_EQ(set->version, 7);
  ASSERT_EQ(set->tensors.size(), 1u);
  EXPECT_TRUE(torch::equal(set->tensors[0].second, w.to(torch::kBFloat16)));
  EXPECT_EQ(resharder.last_stats().bytes_moved, 0);
  EXPECT_EQ(resharder.last_stats().bytes_published, 4 * 3 * 2);
}

TEST(Resharder, PlanErrorsNameTheField) {
  ReshardPlan plan;
  plan.train_dp = 2;
  EXPECT_THROW(plan.validate(1), Error);  // 2 x 1 != 1
  plan.train_dp = 1;
  plan.train_tp = 3;
  plan.infer_tp = 2;
  try {
    plan.validate(3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("infer_tp 2 must divide or be a multiple"),
              std::string::npos)
        << e.what();
  }
}

TEST(Resharder, PlacementCoversEveryInferenceRankOnce) {
  for (auto [dp, tp, infer] : std::vector<std::tuple<int, int, int>>{
           {1, 2, 1}, {2, 1, 2}, {2, 2, 1}, {2, 2, 4}, {1, 4, 2}, {4, 1, 2}}) {
    ReshardPlan plan{dp, tp, infer};
    std::set<std::pair<int, int>> seen;
    for (int rank = 0; rank < dp * tp; ++rank) {
      const InferencePlacement p = inference_placement(plan, rank);
      EXPECT_TRUE(seen.insert({p.replica, p.tp_rank}).second) << dp << "x" << tp << "->" << infer;
      EXPECT_LT(p.tp_rank, infer);
    }
    EXPECT_EQ(static_cast<int>(seen.size()), dp * tp);
  }
}

TEST(Resharder, PlanWithStagesNamesTrainPp) {
  ReshardPlan plan;
  plan.train_pp = 2;
  try {
    plan.validate(1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train_dp x train_pp x train_tp = 2"), std::string::npos)
        << e.what();
  }
  plan.validate(2);
  plan.train_pp = 0;
  EXPECT_THROW(plan.validate(0), Error);
}

// With stages every rank is an inference rank too (rank = dp * pp * tp + stage * tp + r),
// and a rank's inference shard lies inside what its stage peers (same dp, same r) can
// supply: the gather case's peers hold the same shard, the split case's shard is inside
// the training shard r every peer holds.
TEST(Resharder, PlacementWithStagesCoversEveryInferenceRankOnce) {
  for (auto [dp, pp, tp, infer] : std::vector<std::tuple<int, int, int, int>>{
           {1, 2, 1, 1}, {1, 2, 1, 2}, {1, 2, 2, 1}, {1, 2, 2, 4}, {2, 2, 1, 4}, {1, 4, 2, 1}}) {
    ReshardPlan plan{dp, tp, infer};
    plan.train_pp = pp;
    plan.validate(dp * pp * tp);
    std::set<std::pair<int, int>> seen;
    for (int rank = 0; rank < dp * pp * tp; ++rank) {
      const InferencePlacement p = inference_placement(plan, rank);
      EXPECT_TRUE(seen.insert({p.replica, p.tp_rank}).second)
          << dp << "x" << pp << "x" << tp << "->" << infer;
      EXPECT_LT(p.tp_rank, infer);
      const int r = rank % tp;
      if (infer <= tp) {
        const int stage0_peer = rank - ((rank / tp) % pp) * tp;
        EXPECT_EQ(p.tp_rank, inference_placement(plan, stage0_peer).tp_rank);
      } else {
        EXPECT_EQ(p.tp_rank / (infer / tp), r);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), dp * pp * tp);
  }
}

}  // namespace
}  // namespace aspen::parallel
