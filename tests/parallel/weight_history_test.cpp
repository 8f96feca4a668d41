// WeightHistory (parallel/weight_set.h), the versions one TP peer's own shards arrive
// in: take(v) hands over v and forgets the older ones, and take_waiting(v) waits for a
// v its trainer thread has not published yet (a follower may learn of a version from
// its leader before its own copy exists), up to its timeout, and not for a version
// that was passed.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "aspen/parallel/weight_set.h"

namespace aspen::parallel {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<const WeightSet> version(int64_t v) {
  auto set = std::make_shared<WeightSet>();
  set->version = v;
  return set;
}

TEST(WeightHistory, TakeHandsOverTheVersionAndForgetsOnlyOlderOnes) {
  WeightHistory history;
  for (int64_t v : {1, 2, 3}) history.publish(version(v));
  ASSERT_NE(history.take(2), nullptr);
  EXPECT_EQ(history.take(1), nullptr) << "passed";
  EXPECT_EQ(history.latest_version(), 3);
  EXPECT_EQ(history.take(3)->version, 3);
}

TEST(WeightHistory, TakeWaitingGetsAVersionPublishedWhileItWaits) {
  WeightHistory history;
  history.publish(version(1));
  std::thread trainer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    history.publish(version(2));
  });
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const WeightSet> set = history.take_waiting(2, std::chrono::seconds(30));
  trainer.join();
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->version, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
      << "woken by the publish, not by the timeout";
}

TEST(WeightHistory, TakeWaitingGivesUpAtItsTimeoutOrWhenTheVersionWasPassed) {
  WeightHistory history;
  history.publish(version(3));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(history.take_waiting(4, milliseconds(50)), nullptr);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  // Version 2 will never come: 3 is newer. No wait at all.
  const auto passed = std::chrono::steady_clock::now();
  EXPECT_EQ(history.take_waiting(2, std::chrono::seconds(30)), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - passed, std::chrono::seconds(10));
  EXPECT_EQ(history.take_waiting(3, milliseconds(0))->version, 3);
}

}  // namespace
}  // namespace aspen::parallel
