// DockController, the calls an iteration engine drives rows with: dispatch targets,
// the required (staleness) window of a trainer's batch, lease renewal, late row
// infos, discarding, retargeting, the per-consumer backlog and the status board.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "aspen/dock/controller.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

using testing::row_info;
using testing::two_consumer_schema;

// Rows ready for both consumers.
std::vector<RowId> ready_rows(DockController& dock, const std::vector<RowInfo>& rows) {
  std::vector<RowId> ids = dock.allocate(rows, 1.0);
  dock.publish(ids, {"tokens", "reward"}, 0);
  return ids;
}

// Rows generated but not scored: ready for the reference, still pending for the actor.
std::vector<RowId> unscored_rows(DockController& dock, const std::vector<RowInfo>& rows) {
  std::vector<RowId> ids = dock.allocate(rows, 1.0);
  dock.publish(ids, {"tokens"}, 0);
  return ids;
}

std::vector<RowInfo> group_rows(int64_t group, int32_t size, int64_t version) {
  return std::vector<RowInfo>(static_cast<size_t>(size), row_info(group, size, 4, version));
}

// The claim's groups in claim order, each once.
std::vector<int64_t> groups_in(const Claim& claim) {
  std::vector<int64_t> groups;
  for (const ClaimedRow& row : claim.rows) {
    if (groups.empty() || groups.back() != row.info.group_id) groups.push_back(row.info.group_id);
  }
  return groups;
}

ClaimOptions window_through(int64_t version, int64_t max_rows) {
  ClaimOptions options;
  options.whole_groups = true;
  options.required_through_version = version;
  options.max_rows = max_rows;
  return options;
}

class DispatchTest : public ::testing::Test {
 protected:
  DispatchTest() : dock(two_consumer_schema(), DockControllerOptions{64}) {
    dock.register_warehouse("");
  }
  DockController dock;
};

TEST_F(DispatchTest, TargetFilterTakesItsOwnAndUndispatchedRowsOnly) {
  std::vector<RowId> ids = ready_rows(
      dock, {row_info(0, 1, 1, 0, 0), row_info(1, 1, 1, 0, 1), row_info(2, 1, 1, 0, -1)});
  ClaimOptions mine;
  mine.max_rows = 8;
  mine.target = 0;
  Claim claim = dock.claim("actor", mine);
  ASSERT_EQ(claim.rows.size(), 2u);
  EXPECT_EQ(claim.rows[0].id, ids[0]);
  EXPECT_EQ(claim.rows[1].id, ids[2]);
  EXPECT_EQ(claim.rows[0].info.target, 0);
  ClaimOptions any;
  any.max_rows = 8;  // target -1: whatever the rows' targets
  EXPECT_EQ(dock.claim("reference", any).rows.size(), 3u);
}

TEST_F(DispatchTest, RowsBackFromAnExpiredOrReleasedLeaseLoseTheirTarget) {
  ready_rows(dock, {row_info(0, 1, 1, 0, 1), row_info(1, 1, 1, 0, 1)});
  ClaimOptions other;
  other.target = 0;
  EXPECT_TRUE(dock.claim("actor", other).empty());  // both are dispatched to instance 1
  ClaimOptions mine;
  mine.target = 1;
  mine.lease_s = 0.5;
  const Claim expiring = dock.claim("actor", mine);
  mine.lease_s = 60.0;
  const Claim released = dock.claim("actor", mine);
  ASSERT_EQ(expiring.rows.size(), 1u);
  ASSERT_EQ(released.rows.size(), 1u);

  EXPECT_TRUE(dock.release(released.lease));
  Claim after_release = dock.claim("actor", other);
  ASSERT_EQ(after_release.rows.size(), 1u);
  EXPECT_EQ(after_release.rows[0].id, released.rows[0].id);
  EXPECT_EQ(after_release.rows[0].info.target, -1);

  other.timeout_s = 5.0;  // wakes when the short lease expires
  Claim after_expiry = dock.claim("actor", other);
  ASSERT_EQ(after_expiry.rows.size(), 1u);
  EXPECT_EQ(after_expiry.rows[0].id, expiring.rows[0].id);
  EXPECT_EQ(after_expiry.rows[0].info.target, -1);
}

TEST_F(DispatchTest, RequiredGroupsAreAllTakenEvenPastMaxRows) {
  for (int64_t group : {1, 2, 3}) ready_rows(dock, group_rows(group, 2, 0));
  ready_rows(dock, group_rows(4, 2, 5));
  Claim claim = dock.claim("actor", window_through(0, 4));
  EXPECT_EQ(groups_in(claim), (std::vector<int64_t>{1, 2, 3}));  // 6 rows > max_rows 4
  EXPECT_EQ(claim.pending_required_rows, 0);
  EXPECT_EQ(claim.ready_rows_left, 2);  // group 4
}

TEST_F(DispatchTest, OtherGroupsFillByVersionThenRowId) {
  ready_rows(dock, group_rows(10, 2, 3));
  ready_rows(dock, group_rows(11, 2, 2));
  ready_rows(dock, group_rows(12, 2, 1));  // the one required group
  ready_rows(dock, group_rows(13, 2, 2));
  Claim claim = dock.claim("actor", window_through(1, 6));
  // Required first, then (version 2, older rows) 11, (version 2) 13; 10 does not fit.
  EXPECT_EQ(groups_in(claim), (std::vector<int64_t>{12, 11, 13}));
  EXPECT_EQ(claim.ready_rows_left, 2);
}

TEST_F(DispatchTest, PendingRequiredGroupKeepsItsRoomInAStreamingPart) {
  ready_rows(dock, group_rows(1, 2, 0));
  unscored_rows(dock, group_rows(2, 2, 0));  // required, not claimable by the actor yet
  ready_rows(dock, group_rows(3, 2, 1));
  ready_rows(dock, group_rows(4, 2, 1));
  ClaimOptions streaming = window_through(0, 6);
  streaming.complete_window = false;
  Claim part = dock.claim("actor", streaming);
  // 1 (required) + 3 fill 4 of 6 rows; the last 2 are group 2's, so 4 waits.
  EXPECT_EQ(groups_in(part), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(part.pending_required_rows, 2);
  EXPECT_EQ(part.ready_rows_left, 2);
}

TEST_F(DispatchTest, CompleteWindowWaitsUntilPendingGroupsAreReady) {
  ready_rows(dock, group_rows(1, 2, 0));
  std::vector<RowId> pending = unscored_rows(dock, group_rows(2, 2, 0));
  ClaimOptions whole = window_through(0, 4);
  whole.min_rows = 4;
  whole.timeout_s = 0.05;
  Claim missed = dock.claim("actor", whole);
  EXPECT_TRUE(missed.empty());
  EXPECT_TRUE(missed.timed_out);
  EXPECT_EQ(missed.pending_required_rows, 2);
  EXPECT_EQ(missed.ready_rows_left, 2);  // nothing was taken: every ready row was left

  whole.timeout_s = 10.0;
  auto waiting = std::async(std::launch::async, [&] { return dock.claim("actor", whole); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  dock.publish(pending, {"reward"}, 0);  // group 2 scored
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Claim batch = waiting.get();
  EXPECT_EQ(groups_in(batch), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(batch.pending_required_rows, 0);
  EXPECT_FALSE(batch.timed_out);
}

TEST_F(DispatchTest, DiscardingAPendingGroupCompletesTheWindow) {
  ready_rows(dock, group_rows(1, 2, 0));
  std::vector<RowId> dropped = unscored_rows(dock, group_rows(2, 2, 0));
  ClaimOptions whole = window_through(0, 4);
  whole.timeout_s = 10.0;
  auto waiting = std::async(std::launch::async, [&] { return dock.claim("actor", whole); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  dock.discard(dropped);  // e.g. dynamic sampling dropped it: it will never be trained
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(groups_in(waiting.get()), (std::vector<int64_t>{1}));
}

TEST_F(DispatchTest, RequiredWindowNeedsWholeGroups) {
  ClaimOptions options = window_through(0, 4);
  options.whole_groups = false;
  EXPECT_THROW(dock.claim("actor", options), Error);
}

TEST_F(DispatchTest, RenewKeepsALeasePastItsFirstDeadline) {
  ready_rows(dock, {row_info(0, 1, 1)});
  ClaimOptions brief;
  brief.lease_s = 0.2;
  const Claim claim = dock.claim("actor", brief);
  ASSERT_EQ(claim.rows.size(), 1u);
  EXPECT_TRUE(dock.renew(claim.lease, 30.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(dock.claim("actor", {}).empty());  // still leased
  EXPECT_TRUE(dock.ack(claim.lease).acknowledged);
  EXPECT_EQ(dock.metrics()["leases_expired"], 0);
}

TEST_F(DispatchTest, AnExpiredLeaseCannotBeRenewed) {
  ready_rows(dock, {row_info(0, 1, 1)});
  ClaimOptions brief;
  brief.lease_s = 0.05;
  const Claim claim = dock.claim("actor", brief);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(dock.renew(claim.lease, 30.0));
  EXPECT_FALSE(dock.renew(12345, 30.0));  // never existed
  EXPECT_EQ(dock.claim("actor", {}).rows.size(), 1u);
  EXPECT_THROW(dock.renew(claim.lease, 0.0), Error);
}

TEST_F(DispatchTest, UpdateInfoChangesTheVersionAndAWaitingWindowSeesIt) {
  std::vector<RowId> ids = ready_rows(dock, {row_info(0, 1, 4, 0)});
  ClaimOptions fresh;
  fresh.min_version = 5;
  EXPECT_TRUE(dock.claim("actor", fresh).empty());
  fresh.timeout_s = 10.0;
  auto waiting = std::async(std::launch::async, [&] { return dock.claim("actor", fresh); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  dock.update_info(ids, {row_info(0, 1, 9, 5)});
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Claim claim = waiting.get();
  ASSERT_EQ(claim.rows.size(), 1u);
  EXPECT_EQ(claim.rows[0].info.version, 5);
  EXPECT_EQ(claim.rows[0].info.tokens, 9);
}

TEST_F(DispatchTest, UpdateInfoRejectsGroupChangesAndChangesNothing) {
  std::vector<RowId> ids = ready_rows(dock, {row_info(0, 2, 4, 0, 3), row_info(0, 2, 4, 0, 3)});
  EXPECT_THROW(dock.update_info(ids, {row_info(0, 2, 5, 1, 3), row_info(1, 2, 5, 1, 3)}), Error);
  EXPECT_THROW(dock.update_info(ids, {row_info(0, 2, 5, 1, 3), row_info(0, 3, 5, 1, 3)}), Error);
  EXPECT_THROW(dock.update_info(ids, {row_info(0, 2, 5, 1, 3)}), Error);  // one info, two rows
  EXPECT_THROW(dock.update_info({12345}, {row_info(0, 2, 5, 1, 3)}), Error);
  ClaimOptions all;
  all.max_rows = 8;
  for (const ClaimedRow& row : dock.claim("actor", all).rows) {
    EXPECT_EQ(row.info.version, 0);  // the first row of the bad calls was not applied
    EXPECT_EQ(row.info.tokens, 4);
  }
}

TEST_F(DispatchTest, UpdateInfoFromAClaimantWhoseLeaseExpiredKeepsTheDocksTarget) {
  std::vector<RowId> ids = ready_rows(dock, {row_info(0, 1, 4, 0, 3)});
  ClaimOptions mine;
  mine.target = 3;
  mine.lease_s = 0.05;
  const Claim claim = dock.claim("reference", mine);
  ASSERT_EQ(claim.rows.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // expires: target cleared
  RowInfo stale = claim.rows[0].info;                           // still says target 3
  stale.tokens = 6;
  stale.version = 2;
  dock.update_info(ids, {stale});
  Claim after = dock.claim("actor", {});
  ASSERT_EQ(after.rows.size(), 1u);
  EXPECT_EQ(after.rows[0].info.target, -1);
  EXPECT_EQ(after.rows[0].info.version, 2);
  EXPECT_EQ(after.rows[0].info.tokens, 6);
}

TEST_F(DispatchTest, DiscardFreesCapacityForABlockedAllocate) {
  DockController small(two_consumer_schema(), DockControllerOptions{2});
  small.register_warehouse("");
  std::vector<RowId> ids = ready_rows(small, {row_info(0, 1, 1), row_info(1, 1, 1)});
  auto blocked =
      std::async(std::launch::async, [&] { return small.allocate({row_info(2, 1, 1)}, 10.0); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  std::vector<RetiredRow> retired = small.discard({ids[0], 12345});  // unknown ids are ignored
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].id, ids[0]);
  EXPECT_EQ(retired[0].warehouses, (std::vector<WarehouseId>{0}));
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(blocked.get().size(), 1u);
  EXPECT_EQ(small.metrics()["rows_discarded"], 1);
}

TEST_F(DispatchTest, DiscardTakesTheRowOutOfTheLeaseHoldingIt) {
  std::vector<RowId> ids = ready_rows(dock, {row_info(0, 1, 1), row_info(1, 1, 1)});
  ClaimOptions both;
  both.max_rows = 2;
  const Claim claim = dock.claim("actor", both);
  ASSERT_EQ(claim.rows.size(), 2u);
  dock.discard({ids[0]});
  AckResult acked = dock.ack(claim.lease);  // the lease holds only ids[1] now
  EXPECT_TRUE(acked.acknowledged);
  EXPECT_TRUE(acked.retired.empty());  // ids[1] waits for the reference
  Claim reference = dock.claim("reference", both);
  ASSERT_EQ(reference.rows.size(), 1u);
  EXPECT_EQ(reference.rows[0].id, ids[1]);
  AckResult last = dock.ack(reference.lease);
  ASSERT_EQ(last.retired.size(), 1u);
  EXPECT_EQ(last.retired[0].id, ids[1]);  // ids[0] is not retired twice
  EXPECT_EQ(dock.metrics()["live_rows"], 0);
}

TEST_F(DispatchTest, DiscardingOnlyUnleasedRowsLeavesAHeldRowToItsHolder) {
  std::vector<RowId> ids = ready_rows(dock, {row_info(0, 1, 1), row_info(1, 1, 1)});
  ClaimOptions one;
  const Claim held = dock.claim("actor", one);  // ids[0]
  ASSERT_EQ(held.rows.size(), 1u);
  const std::vector<RetiredRow> retired = dock.discard(ids, /*unleased_only=*/true);
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].id, ids[1]);
  EXPECT_TRUE(dock.renew(held.lease, 10.0));  // the holder still has its row
  EXPECT_EQ(dock.metrics()["live_rows"], 1);
  EXPECT_EQ(dock.discard(ids, true).size(), 0u);  // still held: nothing
  dock.ack(held.lease);
  EXPECT_EQ(dock.discard(ids, true).size(), 1u);  // free now
  EXPECT_EQ(dock.metrics()["live_rows"], 0);
}

TEST_F(DispatchTest, RetargetMovesOnlyRowsNoConsumerHolds) {
  std::vector<RowId> ids =
      ready_rows(dock, {row_info(0, 1, 1, 0, 1), row_info(1, 1, 1, 0, 1), row_info(2, 1, 1, 0, 2)});
  ClaimOptions first;
  first.target = 1;
  const Claim held = dock.claim("actor", first);  // ids[0], leased where it was dispatched
  ASSERT_EQ(held.rows.size(), 1u);
  ClaimOptions moved;
  moved.target = 3;
  moved.max_rows = 8;
  moved.timeout_s = 10.0;
  auto waiting = std::async(std::launch::async, [&] { return dock.claim("actor", moved); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(dock.retarget(1, 3), 1);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Claim claim = waiting.get();
  ASSERT_EQ(claim.rows.size(), 1u);
  EXPECT_EQ(claim.rows[0].id, ids[1]);
  EXPECT_EQ(claim.rows[0].info.target, 3);
  EXPECT_EQ(dock.retarget(1, 3), 0);  // ids[0] is still leased
  EXPECT_EQ(dock.retarget(2, -1), 1);
}

TEST_F(DispatchTest, BacklogCountsRowsGroupsReadyAndLeased) {
  ready_rows(dock, group_rows(0, 2, 0));
  unscored_rows(dock, {row_info(1, 1, 1)});
  ready_rows(dock, {row_info(2, 1, 1)});
  const Claim one = dock.claim("actor", {});  // a row of group 0
  ASSERT_EQ(one.rows.size(), 1u);
  ConsumerBacklog actor = dock.backlog("actor");
  EXPECT_EQ(actor.rows, 3);
  EXPECT_EQ(actor.groups, 3);
  EXPECT_EQ(actor.ready_rows, 2);  // group 1 is not scored
  EXPECT_EQ(actor.leased_rows, 1);
  dock.ack(one.lease);
  actor = dock.backlog("actor");
  EXPECT_EQ(actor.rows, 3);
  EXPECT_EQ(actor.leased_rows, 0);
  ConsumerBacklog reference = dock.backlog("reference");
  EXPECT_EQ(reference.rows, 4);
  EXPECT_EQ(reference.groups, 3);
  EXPECT_EQ(reference.ready_rows, 4);
  EXPECT_THROW(dock.backlog("nobody"), Error);
}

TEST_F(DispatchTest, StatusBoardAgesGrowAndAPostReplaces) {
  dock.post_status("instance/0", R"({"queued": 3})");
  dock.post_status("instance/1", R"({"queued": 0})");
  dock.post_status("policy", "7");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const std::map<std::string, StatusEntry> first = dock.statuses("instance/");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first.at("instance/0").value, R"({"queued": 3})");
  EXPECT_GE(first.at("instance/0").age_s, 0.05);
  dock.post_status("instance/0", R"({"queued": 1})");
  const std::map<std::string, StatusEntry> second = dock.statuses("instance/");
  EXPECT_EQ(second.at("instance/0").value, R"({"queued": 1})");
  EXPECT_LT(second.at("instance/0").age_s, first.at("instance/0").age_s);  // reposted
  EXPECT_GE(second.at("instance/1").age_s, first.at("instance/1").age_s);  // older still
  EXPECT_EQ(dock.statuses("").size(), 3u);
  EXPECT_TRUE(dock.statuses("trainer").empty());
}

}  // namespace
}  // namespace aspen::dock
