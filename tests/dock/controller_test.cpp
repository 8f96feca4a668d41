// DockController claim semantics: readiness, atomic claims, options, leases,
// retirement and back-pressure, all in-process.
#include "aspen/dock/controller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

using testing::row_info;
using testing::two_consumer_schema;

std::vector<RowId> add_rows(DockController& dock, const std::vector<RowInfo>& rows,
                            const std::vector<std::string>& columns = {"tokens", "reward"}) {
  std::vector<RowId> ids = dock.allocate(rows, 1.0);
  dock.publish(ids, columns, 0);
  return ids;
}

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : dock(two_consumer_schema(), DockControllerOptions{8}) {
    dock.register_warehouse("");
  }
  DockController dock;
};

TEST_F(ControllerTest, RowIsClaimableOnlyOnceItsNeededColumnsArePublished) {
  std::vector<RowId> ids = dock.allocate({row_info(0, 1, 4)}, 1.0);
  dock.publish(ids, {"tokens"}, 0);
  EXPECT_TRUE(dock.claim("actor", {}).empty());  // actor also needs reward
  Claim reference = dock.claim("reference", {});
  ASSERT_EQ(reference.rows.size(), 1u);
  dock.publish(ids, {"reward"}, 0);
  Claim actor = dock.claim("actor", {});
  ASSERT_EQ(actor.rows.size(), 1u);
  EXPECT_EQ(actor.rows[0].locations, (std::vector<WarehouseId>{0, 0}));
}

TEST_F(ControllerTest, EachConsumerGetsARowExactlyOnce) {
  add_rows(dock, {row_info(0, 1, 4), row_info(1, 1, 4)});
  ClaimOptions options;
  options.max_rows = 8;
  EXPECT_EQ(dock.claim("actor", options).rows.size(), 2u);
  EXPECT_TRUE(dock.claim("actor", options).empty());
  EXPECT_EQ(dock.claim("reference", options).rows.size(), 2u);
}

TEST_F(ControllerTest, MinRowsClaimsNothingUntilEnoughAreReady) {
  add_rows(dock, {row_info(0, 1, 4)});
  ClaimOptions options;
  options.max_rows = 4;
  options.min_rows = 2;
  options.timeout_s = 0.05;
  Claim claim = dock.claim("actor", options);
  EXPECT_TRUE(claim.empty());
  EXPECT_TRUE(claim.timed_out);
  options.timeout_s = 5.0;
  auto waiting = std::async(std::launch::async, [&] { return dock.claim("actor", options); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  add_rows(dock, {row_info(1, 1, 4)});
  Claim both = waiting.get();
  EXPECT_EQ(both.rows.size(), 2u);
  EXPECT_FALSE(both.timed_out);
}

TEST_F(ControllerTest, WholeGroupsTakesOnlyCompleteGroupsThatFit) {
  add_rows(dock, {row_info(7, 2, 1), row_info(8, 3, 1), row_info(8, 3, 1), row_info(7, 2, 1),
                  row_info(9, 2, 1), row_info(8, 3, 1)});  // group 9 is missing a row
  ClaimOptions options;
  options.max_rows = 4;
  options.whole_groups = true;
  Claim claim = dock.claim("actor", options);
  // Group 7 (2 rows) fits; group 8 (3 rows) would exceed 4; group 9 is incomplete.
  ASSERT_EQ(claim.rows.size(), 2u);
  for (const ClaimedRow& row : claim.rows) EXPECT_EQ(row.info.group_id, 7);
  options.max_rows = 3;
  claim = dock.claim("actor", options);
  ASSERT_EQ(claim.rows.size(), 3u);
  for (const ClaimedRow& row : claim.rows) EXPECT_EQ(row.info.group_id, 8);
  EXPECT_TRUE(dock.claim("actor", options).empty());
}

TEST_F(ControllerTest, OrderAndVersionWindow) {
  std::vector<RowId> ids =
      add_rows(dock, {row_info(0, 1, 1, 3), row_info(1, 1, 1, 5), row_info(2, 1, 1, 7)});
  ClaimOptions options;
  options.oldest_first = false;
  EXPECT_EQ(dock.claim("actor", options).rows[0].id, ids[2]);
  options.oldest_first = true;
  options.min_version = 4;
  options.max_version = 6;
  Claim claim = dock.claim("actor", options);
  ASSERT_EQ(claim.rows.size(), 1u);
  EXPECT_EQ(claim.rows[0].info.version, 5);
  EXPECT_TRUE(dock.claim("actor", options).empty());
}

TEST_F(ControllerTest, GroupFilterClaimsOnlyTheNamedGroups) {
  add_rows(dock, {row_info(3, 1, 1), row_info(4, 1, 1), row_info(5, 1, 1), row_info(6, 1, 1)});
  ClaimOptions options;
  options.max_rows = 8;
  options.groups = {6, 4};
  Claim claim = dock.claim("actor", options);
  ASSERT_EQ(claim.rows.size(), 2u);
  EXPECT_EQ(claim.rows[0].info.group_id, 4);
  EXPECT_EQ(claim.rows[1].info.group_id, 6);
  options.groups.clear();
  EXPECT_EQ(dock.claim("actor", options).rows.size(), 2u);  // 3 and 5 remain
}

TEST_F(ControllerTest, ExpiredLeaseReturnsRowsAndLateAckFails) {
  add_rows(dock, {row_info(0, 1, 1)});
  ClaimOptions options;
  options.lease_s = 0.05;
  Claim first = dock.claim("actor", options);
  ASSERT_EQ(first.rows.size(), 1u);
  options.timeout_s = 2.0;  // waits for the expiry, no other wake-up happens
  Claim second = dock.claim("actor", options);
  ASSERT_EQ(second.rows.size(), 1u);
  EXPECT_EQ(second.rows[0].id, first.rows[0].id);
  EXPECT_FALSE(dock.ack(first.lease).acknowledged);
  EXPECT_TRUE(dock.ack(second.lease).acknowledged);
  EXPECT_EQ(dock.metrics()["leases_expired"], 1);
}

// The ledger's time is the injected clock's (util/clock.h): a lease lasts until a
// virtual clock passes its deadline however long the real wait, and the status board's
// ages are virtual too. This is what the simulator runs on.
TEST(ControllerClock, LeasesAndStatusAgesFollowAManualClock) {
  ManualClock clock;
  DockControllerOptions options{8};
  options.clock = &clock;
  DockController dock(two_consumer_schema(), options);
  dock.register_warehouse("");
  add_rows(dock, {row_info(0, 1, 1)});
  ClaimOptions claim_options;
  claim_options.lease_s = 10.0;
  const Claim first = dock.claim("actor", claim_options);
  ASSERT_EQ(first.rows.size(), 1u);
  dock.post_status("instance/0", "{}");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // real time: no effect
  EXPECT_TRUE(dock.claim("actor", claim_options).empty());
  EXPECT_EQ(dock.statuses("instance/").at("instance/0").age_s, 0.0);
  clock.advance(9.5);
  EXPECT_TRUE(dock.claim("actor", claim_options).empty());
  EXPECT_DOUBLE_EQ(dock.statuses("instance/").at("instance/0").age_s, 9.5);
  clock.advance(0.5);  // the deadline: the rows go back to the pool
  const Claim second = dock.claim("actor", claim_options);
  ASSERT_EQ(second.rows.size(), 1u);
  EXPECT_FALSE(dock.ack(first.lease).acknowledged);
  EXPECT_TRUE(dock.ack(second.lease).acknowledged);
  EXPECT_THROW(clock.advance_to(1.0), Error);  // a virtual clock never goes back
}

TEST_F(ControllerTest, ReleaseReturnsRowsAtOnce) {
  add_rows(dock, {row_info(0, 1, 1)});
  Claim claim = dock.claim("actor", {});
  EXPECT_TRUE(dock.release(claim.lease));
  EXPECT_EQ(dock.claim("actor", {}).rows.size(), 1u);
}

TEST_F(ControllerTest, RowRetiresWhenEveryConsumerAcked) {
  std::vector<RowId> ids = add_rows(dock, {row_info(0, 1, 1)});
  AckResult actor = dock.ack(dock.claim("actor", {}).lease);
  EXPECT_TRUE(actor.acknowledged);
  EXPECT_TRUE(actor.retired.empty());
  AckResult reference = dock.ack(dock.claim("reference", {}).lease);
  ASSERT_EQ(reference.retired.size(), 1u);
  EXPECT_EQ(reference.retired[0].id, ids[0]);
  EXPECT_EQ(reference.retired[0].warehouses, (std::vector<WarehouseId>{0}));
  EXPECT_EQ(dock.metrics()["live_rows"], 0);
}

TEST_F(ControllerTest, ProducerBlocksAtCapacityAndResumesAfterRetirement) {
  std::vector<RowInfo> eight(8, row_info(0, 1, 1));
  add_rows(dock, eight);
  EXPECT_TRUE(dock.allocate({row_info(1, 1, 1)}, 0.05).empty());  // full: times out
  auto blocked =
      std::async(std::launch::async, [&] { return dock.allocate({row_info(1, 1, 1)}, 10.0); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  for (const char* consumer : {"actor", "reference"}) {
    dock.ack(dock.claim(consumer, {}).lease);  // retires one row
  }
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(blocked.get().size(), 1u);
  EXPECT_GT(dock.metrics()["producer_wait_s"].get<double>(), 0.05);
  EXPECT_THROW(dock.allocate(std::vector<RowInfo>(9, row_info(0, 1, 1)), 0.0), Error);
}

TEST_F(ControllerTest, BalancedClaimSplitsByTokensWithinGrahamBound) {
  std::vector<RowInfo> rows;
  std::vector<int64_t> tokens = {900, 30, 400, 380, 20, 410, 350, 10};
  for (int64_t t : tokens) rows.push_back(row_info(0, 1, t));
  add_rows(dock, rows);
  ClaimOptions options;
  options.max_rows = 8;
  options.balance_ranks = 3;
  Claim claim = dock.claim("actor", options);
  ASSERT_EQ(claim.ranks.size(), 3u);
  int64_t max_load = 0, total = 0;
  size_t count = 0;
  std::map<RowId, int64_t> by_id;
  for (const ClaimedRow& row : claim.rows) by_id[row.id] = row.info.tokens;
  for (const auto& rank : claim.ranks) {
    int64_t load = 0;
    for (RowId id : rank) load += by_id.at(id);
    max_load = std::max(max_load, load);
    total += load;
    count += rank.size();
  }
  EXPECT_EQ(count, 8u);
  EXPECT_EQ(total, 2500);
  // Optimum max load is 900 (the largest row); LPT/KK reach 900 here.
  EXPECT_EQ(max_load, 900);
  EXPECT_NEAR(claim.imbalance, 900.0 / (2500.0 / 3) - 1, 1e-9);
  EXPECT_EQ(dock.metrics()["consumers"]["actor"]["balanced_claims"], 1);
}

TEST_F(ControllerTest, BadInputIsAnError) {
  EXPECT_THROW(dock.claim("nobody", {}), Error);
  ClaimOptions bad;
  bad.min_rows = 5;
  bad.max_rows = 2;
  EXPECT_THROW(dock.claim("actor", bad), Error);
  EXPECT_THROW(dock.publish({12345}, {"tokens"}, 0), Error);
  EXPECT_THROW(dock.publish({}, {"nope"}, 0), Error);
}

}  // namespace
}  // namespace aspen::dock
