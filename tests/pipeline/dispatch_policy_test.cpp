// Dispatcher on scripted queue states: each policy's choice, the dispatcher's own
// account of groups a stale snapshot does not show, and the response-length and
// throughput estimates steering queue_aware.
#include "aspen/pipeline/dispatch_policy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "aspen/config/train_config.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

QueueState state(int64_t running, int64_t waiting, int64_t outstanding_tokens) {
  QueueState s;
  s.running = running;
  s.waiting = waiting;
  s.outstanding_tokens = outstanding_tokens;
  return s;
}

GroupShape group(int64_t n, int64_t prompt_tokens, int64_t max_tokens) {
  GroupShape g;
  g.n = n;
  g.prompt_tokens = prompt_tokens;
  g.max_tokens = max_tokens;
  return g;
}

TEST(DispatchRoundRobin, CyclesInOrderIgnoringLoad) {
  Dispatcher dispatcher(DispatchPolicyKind::kRoundRobin, 3);
  const std::vector<QueueState> states = {state(50, 50, 100000), state(0, 0, 0), state(0, 0, 0)};
  std::vector<int> order;
  for (int i = 0; i < 7; ++i) {
    const int chosen = dispatcher.choose(states, group(4, 10, 64));
    dispatcher.on_dispatched(chosen, group(4, 10, 64));
    order.push_back(chosen);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(DispatchLeastRequests, PicksFewestSamplesAndBreaksTiesToLowestIndex) {
  Dispatcher dispatcher(DispatchPolicyKind::kLeastRequests, 3);
  // running + waiting: 4, 2, 2 -> 1 (tie with 2 goes to the lower index).
  EXPECT_EQ(dispatcher.choose({state(3, 1, 10), state(1, 1, 9000), state(2, 0, 5)}, group(1, 1, 8)),
            1);
  EXPECT_EQ(dispatcher.choose({state(0, 0, 0), state(0, 0, 0), state(0, 0, 0)}, group(1, 1, 8)), 0);
  EXPECT_EQ(dispatcher.choose({state(1, 0, 0), state(0, 3, 0), state(0, 0, 0)}, group(1, 1, 8)), 2);
}

TEST(DispatchQueueAware, PrefersFewerOutstandingTokensOverFewerRequests) {
  // Instance 0: 2 samples with long work ahead; instance 1: 4 nearly finished samples.
  const std::vector<QueueState> states = {state(2, 0, 1000), state(4, 0, 100)};
  const GroupShape g = group(4, 50, 512);
  Dispatcher queue_aware(DispatchPolicyKind::kQueueAware, 2);
  EXPECT_EQ(queue_aware.choose(states, g), 1);
  // est = 512 / 2 = 256: instance 0 min(1000, 2*256) = 512, instance 1 min(100, 4*256) = 100,
  // plus the group's own 50 + 4*256 on both, at the default throughput 1.
  const std::vector<double> seconds = queue_aware.expected_seconds(states, g);
  EXPECT_DOUBLE_EQ(seconds[0], 512 + 50 + 1024);
  EXPECT_DOUBLE_EQ(seconds[1], 100 + 50 + 1024);
  // Counting requests alone picks the other one.
  Dispatcher least(DispatchPolicyKind::kLeastRequests, 2);
  EXPECT_EQ(least.choose(states, g), 0);
}

TEST(DispatchQueueAware, TiesGoToLowestIndex) {
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 3);
  EXPECT_EQ(
      dispatcher.choose({state(1, 0, 300), state(0, 0, 0), state(0, 0, 0)}, group(2, 10, 100)), 1);
  EXPECT_EQ(dispatcher.choose({state(0, 0, 0), state(0, 0, 0), state(0, 0, 0)}, group(2, 10, 100)),
            0);
}

TEST(DispatchBackToBack, GroupsFromOneSnapshotSpreadOverIdleInstances) {
  for (auto kind : {DispatchPolicyKind::kQueueAware, DispatchPolicyKind::kLeastRequests}) {
    Dispatcher dispatcher(kind, 3);
    const std::vector<QueueState> snapshot(3, state(0, 0, 0));  // never refreshed
    const GroupShape g = group(4, 30, 128);
    std::vector<int> order;
    for (int i = 0; i < 4; ++i) {
      const int chosen = dispatcher.choose(snapshot, g);
      dispatcher.on_dispatched(chosen, g);
      order.push_back(chosen);
    }
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0})) << name_of(kind);
    EXPECT_EQ(dispatcher.own_outstanding(0), 8);
    EXPECT_EQ(dispatcher.own_outstanding(1), 4);
  }
}

TEST(DispatchBackToBack, RefreshedStateIsNotCountedTwice) {
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  const GroupShape g = group(4, 50, 512);
  dispatcher.on_dispatched(0, g);
  // Stale snapshot: the 4 samples are unseen, each costs est 256 + prompt share 50/4.
  const std::vector<QueueState> stale(2, state(0, 0, 0));
  EXPECT_DOUBLE_EQ(dispatcher.expected_seconds(stale, g)[0], 4 * (256 + 12.5) + 50 + 4 * 256);
  // Refreshed: the instance reports the group as waiting; only the reported work counts.
  const std::vector<QueueState> fresh = {state(0, 4, 50 + 4 * 512), state(0, 0, 0)};
  EXPECT_DOUBLE_EQ(dispatcher.expected_seconds(fresh, g)[0], 4 * 256 + 50 + 4 * 256);
  EXPECT_EQ(dispatcher.choose(fresh, g), 1);
}

TEST(DispatchAccounting, CompletionsReleaseOwnSamplesAndNeverGoNegative) {
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  dispatcher.on_dispatched(1, group(2, 40, 64));
  dispatcher.on_completed(1, 40, 10);
  EXPECT_EQ(dispatcher.own_outstanding(1), 1);
  // One unseen sample left, carrying the remaining half of the prompt tokens (20).
  const std::vector<QueueState> stale(2, state(0, 0, 0));
  const double est = dispatcher.response_estimate(64);
  EXPECT_DOUBLE_EQ(dispatcher.expected_seconds(stale, group(1, 0, 64))[1], (est + 20) + est);
  dispatcher.on_completed(1, 40, 10);
  dispatcher.on_completed(1, 40, 10);  // reported by someone else: no underflow
  EXPECT_EQ(dispatcher.own_outstanding(1), 0);
  EXPECT_DOUBLE_EQ(dispatcher.expected_seconds(stale, group(1, 0, 64))[1], est);
}

TEST(DispatchResponseEstimate, StartsAtHalfTheBudgetAndFollowsObservedLengths) {
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(512), 256);
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(100), 50);
  dispatcher.on_completed(0, 10, 100);
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(512), 100);  // first observation replaces prior
  dispatcher.on_completed(0, 10, 200);
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(512), 150);  // running mean at first
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(64), 64);    // never above max_tokens
  for (int i = 0; i < 200; ++i) dispatcher.on_completed(1, 10, 400);
  EXPECT_NEAR(dispatcher.response_estimate(512), 400, 1.0);  // EMA follows the new length
  EXPECT_LE(dispatcher.response_estimate(512), 400);
}

TEST(DispatchResponseEstimate, ShortObservedResponsesShiftTheChoiceToCountingSamples) {
  // Instance 0: 2 samples, 300 tokens upper bound; instance 1: 4 samples, 200 upper bound.
  const std::vector<QueueState> states = {state(2, 0, 300), state(4, 0, 200)};
  const GroupShape g = group(2, 10, 512);
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  // est 256: min(300, 512) = 300 vs min(200, 1024) = 200.
  EXPECT_EQ(dispatcher.choose(states, g), 1);
  for (int i = 0; i < 10; ++i) dispatcher.on_completed(0, 10, 10);
  // est 10: min(300, 20) = 20 vs min(200, 40) = 40.
  EXPECT_DOUBLE_EQ(dispatcher.response_estimate(512), 10);
  EXPECT_EQ(dispatcher.choose(states, g), 0);
}

TEST(DispatchThroughput, FasterInstanceWinsEqualQueues) {
  const std::vector<QueueState> states(2, state(2, 0, 400));
  const GroupShape g = group(2, 10, 256);
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  EXPECT_EQ(dispatcher.choose(states, g), 0);
  EXPECT_DOUBLE_EQ(dispatcher.throughput(0), 1.0);
  // Only instance 1 measured: instance 0 is assumed average (the same), still a tie.
  dispatcher.on_throughput(1, 200);
  EXPECT_DOUBLE_EQ(dispatcher.throughput(0), 200);
  EXPECT_EQ(dispatcher.choose(states, g), 0);
  dispatcher.on_throughput(0, 100);
  EXPECT_EQ(dispatcher.choose(states, g), 1);
  // Instance 1 may carry more work and still win while it is fast enough.
  EXPECT_EQ(dispatcher.choose({state(2, 0, 400), state(3, 0, 600)}, g), 1);
  // EMA: 100 + 0.3 * (300 - 100) = 160.
  dispatcher.on_throughput(0, 300);
  EXPECT_DOUBLE_EQ(dispatcher.throughput(0), 160);
}

TEST(DispatchErrors, RejectsBadArguments) {
  EXPECT_THROW(Dispatcher(DispatchPolicyKind::kRoundRobin, 0), Error);
  Dispatcher dispatcher(DispatchPolicyKind::kQueueAware, 2);
  EXPECT_THROW(dispatcher.choose({state(0, 0, 0)}, group(1, 1, 8)), Error);
  EXPECT_THROW(dispatcher.choose({state(0, 0, 0), state(0, 0, 0)}, group(0, 1, 8)), Error);
  EXPECT_THROW(dispatcher.choose({state(0, 0, 0), state(0, 0, 0)}, group(1, 1, 0)), Error);
  EXPECT_THROW(dispatcher.on_dispatched(2, group(1, 1, 8)), Error);
  EXPECT_THROW(dispatcher.on_completed(-1, 1, 1), Error);
  EXPECT_THROW(dispatcher.on_completed(0, 1, -1), Error);
  EXPECT_THROW(dispatcher.on_throughput(0, 0.0), Error);
  EXPECT_THROW(dispatcher.on_throughput(0, std::nan("")), Error);
}

}  // namespace
}  // namespace aspen::pipeline
