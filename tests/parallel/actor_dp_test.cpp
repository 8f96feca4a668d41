// Data-parallel actor and critic trainers: 2 ranks, each with its token-balanced share
// of one global batch, end with the same parameters and report the same metrics as one
// process trained on the same global mini-batches (worker/actor_dp_problem.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "run_command.h"
#include "worker/actor_dp_problem.h"
#include "parallel/binaries.h"

namespace aspen::parallel {
namespace {

using testing::DpKind;
using testing::DpRun;

constexpr int kUpdates = 3;

struct RankResult {
  std::vector<torch::Tensor> params;
  torch::Tensor metrics;
};

// Launches 2 ranks of KIND; returns each rank's parameters and metrics.
std::vector<RankResult> run_two_ranks(const std::string& kind, std::string* output) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() /
                                    ("aspen_actor_dp_" + kind + "_" + std::to_string(getpid()));
  const auto result = testing::run_command(kAspen + " launch --nproc-per-node 2 --master-port 0 -- " +
                                           kWorker + " actor_dp " + kind + " " + out.string() +
                                           " " + std::to_string(kUpdates));
  *output = result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::vector<RankResult> ranks;
  for (int rank = 0; rank < 2 && result.exit_code == 0; ++rank) {
    const std::string path = out.string() + ".rank" + std::to_string(rank);
    std::vector<torch::Tensor> saved;
    torch::load(saved, path);
    std::filesystem::remove(path);
    RankResult r;
    r.metrics = saved.back();
    saved.pop_back();
    r.params = saved;
    ranks.push_back(r);
  }
  return ranks;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

void expect_matches_reference(const std::string& kind, double param_tol, double metric_tol) {
  std::string output;
  const std::vector<RankResult> ranks = run_two_ranks(kind, &output);
  ASSERT_EQ(ranks.size(), 2u);
  const DpRun reference = testing::run_dp_reference(testing::parse_dp_kind(kind), 2, kUpdates);
  const DpRun initial = testing::run_dp_reference(testing::parse_dp_kind(kind), 2, 0);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankResult& r = ranks[rank];
    ASSERT_EQ(r.params.size(), reference.params.size());
    for (size_t i = 0; i < r.params.size(); ++i) {
      EXPECT_LT(max_diff(r.params[i], reference.params[i]), param_tol) << "parameter " << i;
    }
    // Same metrics on both ranks (global sums), equal to the reference's.
    EXPECT_TRUE(torch::equal(r.metrics, ranks[0].metrics));
    ASSERT_EQ(r.metrics.sizes(), reference.metrics.sizes());
    EXPECT_LT(max_diff(r.metrics, reference.metrics), metric_tol)
        << "DP:\n" << r.metrics << "\nreference:\n" << reference.metrics;
  }
  // Both ranks hold bit-identical weights (identical summed grads, identical AdamW).
  for (size_t i = 0; i < ranks[0].params.size(); ++i) {
    EXPECT_TRUE(torch::equal(ranks[0].params[i], ranks[1].params[i])) << "parameter " << i;
  }
  // Training moved the weights, so the comparison is not vacuous.
  double moved = 0.0;
  for (size_t i = 0; i < initial.params.size(); ++i) {
    moved = std::max(moved, max_diff(initial.params[i], reference.params[i]));
  }
  EXPECT_GT(moved, 1e-3);
  // 2 steps per update (steps column), every step taken.
  const int steps_col = kind == "critic" ? 4 : 7;
  EXPECT_EQ(reference.metrics.select(1, steps_col).sum().item<double>(), 2.0 * kUpdates);
  if (kind != "actor_bf16") {
    // fp32 compute: the bucket all-reduces started during the last backward.
    EXPECT_EQ(output.find("rank 0: 0 buckets overlapped"), std::string::npos) << output;
  }
}

TEST(ActorDataParallel, TwoRanksMatchOneProcessTokenMean) {
  expect_matches_reference("actor", 2e-5, 1e-5);
}

TEST(ActorDataParallel, TwoRanksMatchOneProcessSeqMean) {
  expect_matches_reference("actor_seq", 2e-5, 1e-5);
}

TEST(ActorDataParallel, Bf16ComputeReducesMasterGradsAfterBackward) {
  // bf16 forward/backward packs rows differently on 2 ranks than in one process, so
  // only a loose match is expected (measured ~2e-3; local denominators give ~1e-1);
  // the ranks still agree bit for bit.
  expect_matches_reference("actor_bf16", 1e-2, 1e-2);
}

TEST(CriticDataParallel, TwoRanksMatchOneProcess) {
  expect_matches_reference("critic", 2e-5, 1e-5);
}

}  // namespace
}  // namespace aspen::parallel
