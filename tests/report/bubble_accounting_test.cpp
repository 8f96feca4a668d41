// BubbleAccounting against hand-computed numbers: padding of padded batches,
// skewness of parallel phases, sorting/idle fractions of wall time, the staleness
// histogram, reset, validation, and concurrent reports adding up.
#include "aspen/report/bubble_accounting.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "aspen/util/error.h"

namespace aspen::report {
namespace {

TEST(BubblePadding, HelperCountsSlotsAsIfPaddedToEachBatchMax) {
  const PaddedSlots one = padded_slots({3, 5, 2});
  EXPECT_EQ(one.slots, 15);  // 5 * 3
  EXPECT_EQ(one.pad, 5);     // 15 - 10
  EXPECT_EQ(padded_slots({}).slots, 0);
  EXPECT_EQ(padded_slots({7}).pad, 0);
  // Each batch padded to its own max: (5 + 0) / (15 + 8).
  EXPECT_DOUBLE_EQ(padding_fraction({{3, 5, 2}, {4, 4}}), 5.0 / 23.0);
  EXPECT_DOUBLE_EQ(padding_fraction({}), 0.0);
  EXPECT_DOUBLE_EQ(padding_fraction({{}, {0, 0}}), 0.0);
  EXPECT_THROW(padded_slots({1, -2}), Error);
}

TEST(BubbleAccounting, ToJsonMatchesHandComputedNumbers) {
  BubbleAccounting bubbles(/*rollout_workers=*/2, /*trainer_workers=*/1);
  bubbles.add_padded_batch(BubbleRole::kRollout, {3, 5, 2});  // 15 slots, 5 pad
  bubbles.add_padded_batch(BubbleRole::kTrainer, {4, 4});     // 8 slots, 0 pad
  bubbles.add_padded_batch(BubbleRole::kTrainer, {1, 3});     // 6 slots, 2 pad
  bubbles.add_padded_batch(BubbleRole::kTrainer, {});         // ignored
  bubbles.add_phase({2.0, 1.0, 1.0});                         // idle 1 + 1 = 2 of 2 * 3 = 6
  bubbles.add_phase({4.0, 4.0});                              // idle 0 of 8
  bubbles.add_phase({0.0, 0.0});                              // nothing ran: ignored
  bubbles.add_sorting_wait(1.0);
  bubbles.add_sorting_wait(0.5);
  bubbles.add_idle(BubbleRole::kTrainer, 2.0);
  bubbles.add_idle(BubbleRole::kRollout, 1.0);  // instance 0
  bubbles.add_idle(BubbleRole::kRollout, 2.0);  // instance 1
  bubbles.add_staleness(0, 8);
  bubbles.add_staleness(1, 4);
  bubbles.add_staleness(0, 2);
  bubbles.add_staleness(2, 0);  // no rows: no bucket

  const nlohmann::json m = bubbles.to_json(10.0);
  EXPECT_DOUBLE_EQ(m["padding_rollout"].get<double>(), 5.0 / 15.0);
  EXPECT_DOUBLE_EQ(m["padding_train"].get<double>(), 2.0 / 14.0);
  EXPECT_DOUBLE_EQ(m["padding"].get<double>(), 7.0 / 29.0);
  EXPECT_DOUBLE_EQ(m["skewness"].get<double>(), 2.0 / 14.0);
  EXPECT_DOUBLE_EQ(m["sorting"].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(m["trainer_idle"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(m["rollout_idle"].get<double>(), 3.0 / 20.0);  // 2 instances * 10 s
  EXPECT_EQ(m["staleness_histogram"], (nlohmann::json{{"0", 10}, {"1", 4}}));
  for (const char* key : {"padding", "padding_rollout", "padding_train", "skewness", "sorting",
                          "trainer_idle", "rollout_idle", "staleness_histogram"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  EXPECT_EQ(m.size(), 8u);
}

TEST(BubbleAccounting, EmptyAndResetGiveZeros) {
  BubbleAccounting bubbles;
  const nlohmann::json empty = bubbles.to_json(5.0);
  for (const char* key : {"padding", "padding_rollout", "padding_train", "skewness", "sorting",
                          "trainer_idle", "rollout_idle"}) {
    EXPECT_DOUBLE_EQ(empty[key].get<double>(), 0.0) << key;
  }
  EXPECT_TRUE(empty["staleness_histogram"].is_object());
  EXPECT_TRUE(empty["staleness_histogram"].empty());

  bubbles.add_padded_batch(BubbleRole::kRollout, {1, 2});
  bubbles.add_phase({1.0, 3.0});
  bubbles.add_sorting_wait(1.0);
  bubbles.add_idle(BubbleRole::kTrainer, 1.0);
  bubbles.add_staleness(3, 1);
  EXPECT_GT(bubbles.to_json(5.0)["padding"].get<double>(), 0.0);
  // Zero wall time: time fractions are 0, not NaN.
  const nlohmann::json zero_wall = bubbles.to_json(0.0);
  EXPECT_DOUBLE_EQ(zero_wall["sorting"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(zero_wall["trainer_idle"].get<double>(), 0.0);

  bubbles.reset();
  EXPECT_EQ(bubbles.to_json(5.0), empty);
}

TEST(BubbleAccounting, RejectsNegativeOrNonFiniteReports) {
  EXPECT_THROW(BubbleAccounting(0, 1), Error);
  EXPECT_THROW(BubbleAccounting(1, 0), Error);
  BubbleAccounting bubbles;
  EXPECT_THROW(bubbles.add_padded_batch(BubbleRole::kTrainer, {3, -1}), Error);
  EXPECT_THROW(bubbles.add_phase({1.0, -0.5}), Error);
  EXPECT_THROW(bubbles.add_phase({1.0, std::nan("")}), Error);
  EXPECT_THROW(bubbles.add_sorting_wait(-1.0), Error);
  EXPECT_THROW(bubbles.add_idle(BubbleRole::kRollout, INFINITY), Error);
  EXPECT_THROW(bubbles.add_staleness(-1, 1), Error);
  EXPECT_THROW(bubbles.add_staleness(0, -1), Error);
  EXPECT_THROW(bubbles.to_json(-1.0), Error);
  // A rejected report leaves the totals untouched.
  EXPECT_DOUBLE_EQ(bubbles.to_json(1.0)["padding"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(bubbles.to_json(1.0)["skewness"].get<double>(), 0.0);
}

TEST(BubbleAccounting, ConcurrentReportsAddUp) {
  BubbleAccounting bubbles(/*rollout_workers=*/4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&bubbles] {
      for (int i = 0; i < 1000; ++i) {
        bubbles.add_staleness(i % 2, 1);
        bubbles.add_idle(BubbleRole::kRollout, 0.001);
        bubbles.add_padded_batch(BubbleRole::kRollout, {1, 3});  // 6 slots, 2 pad
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const nlohmann::json m = bubbles.to_json(2.0);
  EXPECT_EQ(m["staleness_histogram"], (nlohmann::json{{"0", 2000}, {"1", 2000}}));
  EXPECT_NEAR(m["rollout_idle"].get<double>(), 4.0 / 8.0, 1e-9);  // 4 s over 4 workers * 2 s
  EXPECT_DOUBLE_EQ(m["padding_rollout"].get<double>(), 1.0 / 3.0);
}

}  // namespace
}  // namespace aspen::report
