// The weight board's delta chain (dock/weight_board.h): a holder of any version on the
// chain gets the deltas after it (however many versions it skipped) and reaches the
// newest set bit for bit; a holder off the chain (nothing yet, a version before a full
// publish, or one trimmed because its deltas would outweigh the full set) gets the full
// set; a delta that does not lead from the board's version is refused.
#include "aspen/dock/weight_board.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

// Versions 1..count of a two-tensor set, each a small step from the one before in a
// `moved` fraction of the elements.
std::vector<std::shared_ptr<const WeightSet>> versions(int count, double moved = 0.05) {
  torch::manual_seed(11);
  std::vector<std::shared_ptr<const WeightSet>> out;
  torch::Tensor w = torch::randn({256, 64}) * 0.02;
  torch::Tensor b = torch::randn({64});
  for (int v = 1; v <= count; ++v) {
    auto set = std::make_shared<WeightSet>();
    set->version = v;
    set->tensors = {{"w", w.clone()}, {"b", b.clone()}};
    out.push_back(set);
    w = w + torch::randn_like(w) * 1e-6 * (torch::rand_like(w) < moved);
    b = b + torch::randn_like(b) * 1e-6 * (torch::rand_like(b) < moved);
  }
  return out;
}

std::shared_ptr<const WeightDelta> delta_between(const WeightSet& from, const WeightSet& to) {
  return std::make_shared<WeightDelta>(*encode_weight_delta(from, to));
}

std::map<std::string, torch::Tensor> by_name(const WeightSet& set) {
  return {set.tensors.begin(), set.tensors.end()};
}

void expect_equal_sets(const WeightSet& got, const WeightSet& want) {
  EXPECT_EQ(got.version, want.version);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
    EXPECT_TRUE(torch::equal(got.tensors[i].second, want.tensors[i].second)) << want.tensors[i].first;
  }
}

TEST(WeightBoard, AHolderOnTheChainGetsTheDeltasAfterItsVersionAndReachesTheNewestExactly) {
  const auto sets = versions(4);
  WeightBoard board;
  EXPECT_TRUE(board.update(-1).empty());  // nothing published
  board.publish(sets[0]);
  for (int v = 1; v < 4; ++v) board.publish(sets[v], delta_between(*sets[v - 1], *sets[v]));
  EXPECT_EQ(board.deltas_held(), 3u);
  EXPECT_EQ(board.latest(), sets[3]);

  for (int held = 1; held <= 3; ++held) {  // held 1 skipped versions 2 and 3
    const WeightUpdate update = board.update(held);
    EXPECT_EQ(update.full, nullptr);
    ASSERT_EQ(update.deltas.size(), static_cast<size_t>(4 - held));
    EXPECT_EQ(update.deltas.front()->from_version, held);
    EXPECT_EQ(update.version(), 4);
    EXPECT_LT(update.bytes(), sets[3]->bytes());
    expect_equal_sets(*apply_weight_update(update, by_name(*sets[held - 1])), *sets[3]);
  }
  EXPECT_TRUE(board.update(4).empty());  // holds the newest
  for (int held : {-1, 0}) {             // nothing yet / a version never on the chain
    const WeightUpdate update = board.update(held);
    EXPECT_EQ(update.full, sets[3]);
    EXPECT_TRUE(update.deltas.empty());
    EXPECT_EQ(apply_weight_update(update, {}), sets[3]);
  }
}

TEST(WeightBoard, AFullPublishDropsTheChain) {
  const auto sets = versions(3);
  WeightBoard board;
  board.publish(sets[0]);
  board.publish(sets[1], delta_between(*sets[0], *sets[1]));
  board.publish(sets[2]);
  EXPECT_EQ(board.deltas_held(), 0u);
  EXPECT_EQ(board.update(1).full, sets[2]);
  EXPECT_EQ(board.update(2).full, sets[2]);
}

TEST(WeightBoard, TheChainIsTrimmedOnceItsDeltasAreNotSmallerThanTheFullSet) {
  const auto sets = versions(12, /*moved=*/1.0);
  WeightBoard board;
  board.publish(sets[0]);
  int64_t chain_bytes = 0;
  size_t kept = 0;
  for (int v = 1; v < 12; ++v) {
    auto delta = delta_between(*sets[v - 1], *sets[v]);
    chain_bytes += delta->bytes();
    board.publish(sets[v], delta);
    ++kept;
    EXPECT_LT(board.deltas_held(), 12u);
  }
  // Each fp32 step's delta is a good part of the set: eleven of them are more than it.
  ASSERT_GE(chain_bytes, sets[11]->bytes());
  ASSERT_LT(board.deltas_held(), kept);
  const int64_t oldest_held = 12 - static_cast<int64_t>(board.deltas_held());
  EXPECT_EQ(board.update(oldest_held - 1).full, sets[11]);  // trimmed: the full set
  const WeightUpdate update = board.update(oldest_held);
  EXPECT_LT(update.bytes(), sets[11]->bytes());
  expect_equal_sets(*apply_weight_update(update, by_name(*sets[oldest_held - 1])), *sets[11]);
}

TEST(WeightBoard, ADeltaThatDoesNotLeadFromTheBoardsVersionIsRefused) {
  const auto sets = versions(3);
  WeightBoard board;
  EXPECT_THROW(board.publish(sets[1], delta_between(*sets[0], *sets[1])), Error);  // empty board
  board.publish(sets[0]);
  EXPECT_THROW(board.publish(sets[2], delta_between(*sets[1], *sets[2])), Error);  // from 2, not 1
  EXPECT_THROW(board.publish(sets[2], delta_between(*sets[0], *sets[1])), Error);  // to 2, not 3
  EXPECT_EQ(board.latest(), sets[0]);
}

}  // namespace
}  // namespace aspen::dock
