// Retiring a dead producer's warehouse (DockController::retire_warehouse) and row
// owners: the rows it held or owned are lost (published or not), leave the leases
// holding them, free their capacity and are counted; the warehouse stays dead; the
// audit hooks report allocations and exactly the rows an ack consumed. The same
// through the ZeroMQ RemoteController, including an allocate body from a client that
// predates the owner field.
#include <gtest/gtest.h>

#include <future>

#include "aspen/dock/claim_codec.h"
#include "aspen/dock/controller_protocol.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"
#include "raw_frames.h"

namespace aspen::dock {
namespace {

using testing::row_info;

ClaimOptions take(int64_t rows) {
  ClaimOptions options;
  options.max_rows = rows;
  return options;
}

std::vector<RowId> ids_of(const std::vector<RetiredRow>& rows) {
  std::vector<RowId> ids;
  for (const RetiredRow& row : rows) ids.push_back(row.id);
  return ids;
}

// Two producers' warehouses (0 and 1); each allocates two rows it owns and publishes
// one of them to its own warehouse.
struct TwoProducers {
  explicit TwoProducers(ControllerApi& dock) {
    dock.register_warehouse("tcp://a");
    dock.register_warehouse("tcp://b");
    for (WarehouseId w : {0, 1}) {
      std::vector<RowId> ids = dock.allocate({row_info(w, 1, 2), row_info(w, 1, 2)}, 1.0, w);
      dock.publish({ids[0]}, {"tokens", "reward"}, w);
      published.push_back(ids[0]);
      unpublished.push_back(ids[1]);
    }
  }
  std::vector<RowId> published, unpublished;  // [warehouse]
};

TEST(WarehouseRetirement, LosesPublishedAndUnpublishedRowsOfTheDeadWarehouseOnly) {
  DockController dock(testing::two_consumer_schema(), DockControllerOptions{8});
  TwoProducers rows(dock);
  std::vector<RetiredRow> lost = dock.retire_warehouse(0);
  EXPECT_EQ(ids_of(lost), (std::vector<RowId>{rows.published[0], rows.unpublished[0]}));
  EXPECT_EQ(lost[0].warehouses, std::vector<WarehouseId>{0});  // its data lived there
  EXPECT_TRUE(lost[1].warehouses.empty());                      // never published
  const nlohmann::json metrics = dock.metrics();
  EXPECT_EQ(metrics["rows_lost"], 2);
  EXPECT_EQ(metrics["warehouses_retired"], 1);
  EXPECT_EQ(metrics["live_rows"], 2);  // warehouse 1's rows are untouched
  Claim claim = dock.claim("reference", take(8));
  ASSERT_EQ(claim.rows.size(), 1u);
  EXPECT_EQ(claim.rows[0].id, rows.published[1]);
}

TEST(WarehouseRetirement, RowPublishedToTheDeadWarehouseIsLostWhoeverOwnsIt) {
  DockController dock(testing::two_consumer_schema(), DockControllerOptions{8});
  dock.register_warehouse("");
  dock.register_warehouse("");
  std::vector<RowId> ids = dock.allocate({row_info(1, 1, 2)}, 1.0);  // unowned
  dock.publish(ids, {"tokens"}, 1);
  dock.publish(ids, {"reward"}, 0);
  std::vector<RetiredRow> lost = dock.retire_warehouse(1);
  ASSERT_EQ(ids_of(lost), ids);
  EXPECT_EQ(lost[0].warehouses, (std::vector<WarehouseId>{1, 0}));  // 0 still holds a column
  EXPECT_EQ(dock.metrics()["live_rows"], 0);
}

TEST(WarehouseRetirement, LeaseHoldingLostRowsAcksWithoutThem) {
  std::vector<std::pair<int, std::vector<RowId>>> acked;
  DockControllerOptions options{8};
  options.hooks.acked = [&](int consumer, const std::vector<RowId>& rows) {
    acked.emplace_back(consumer, rows);
  };
  DockController dock(testing::two_consumer_schema(), options);
  TwoProducers rows(dock);
  Claim claim = dock.claim("reference", take(8));
  ASSERT_EQ(claim.rows.size(), 2u);  // one row of each warehouse
  EXPECT_EQ(dock.backlog("reference").leased_rows, 2);
  dock.retire_warehouse(0);
  EXPECT_EQ(dock.backlog("reference").leased_rows, 1);
  EXPECT_EQ(dock.metrics()["leased_rows"], 1);
  AckResult result = dock.ack(claim.lease);
  EXPECT_TRUE(result.acknowledged);
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0].first, dock.schema().consumer_index("reference"));
  EXPECT_EQ(acked[0].second, std::vector<RowId>{rows.published[1]});  // the lost row is not
  EXPECT_EQ(dock.metrics()["open_leases"], 0);
}

TEST(WarehouseRetirement, FreesCapacityForABlockedProducer) {
  DockController dock(testing::two_consumer_schema(), DockControllerOptions{4});
  TwoProducers rows(dock);  // full: 4 live rows
  auto blocked = std::async(std::launch::async,
                            [&] { return dock.allocate({row_info(9, 1, 1)}, 10.0, 1); });
  EXPECT_EQ(blocked.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  dock.retire_warehouse(0);
  EXPECT_EQ(blocked.get().size(), 1u);
  EXPECT_EQ(dock.metrics()["live_rows"], 3);
}

TEST(WarehouseRetirement, DeadWarehouseRefusesOwnedAllocationsAndPublishes) {
  DockController dock(testing::two_consumer_schema(), DockControllerOptions{8});
  TwoProducers rows(dock);
  dock.retire_warehouse(1);
  EXPECT_THROW(dock.allocate({row_info(1, 1, 1)}, 0.0, 1), Error);
  EXPECT_THROW(dock.publish({rows.unpublished[0]}, {"tokens"}, 1), Error);
  EXPECT_TRUE(dock.retire_warehouse(1).empty());  // idempotent
  EXPECT_EQ(dock.warehouse_endpoints(), (std::vector<std::string>{"tcp://a", ""}));
  EXPECT_THROW(dock.retire_warehouse(7), Error);  // never registered
  EXPECT_THROW(dock.allocate({row_info(1, 1, 1)}, 0.0, 7), Error);
  EXPECT_EQ(dock.metrics()["rows_lost"], 2);
}

TEST(WarehouseRetirement, AllocationHookReportsIdsInfosAndOwner) {
  std::vector<RowId> seen;
  WarehouseId seen_owner = -2;
  DockControllerOptions options{8};
  options.hooks.allocated = [&](const std::vector<RowId>& ids, const std::vector<RowInfo>& infos,
                                WarehouseId owner) {
    ASSERT_EQ(ids.size(), infos.size());
    seen.insert(seen.end(), ids.begin(), ids.end());
    seen_owner = owner;
  };
  DockController dock(testing::two_consumer_schema(), options);
  dock.register_warehouse("");
  std::vector<RowId> ids = dock.allocate({row_info(1, 1, 1), row_info(2, 1, 1)}, 1.0, 0);
  EXPECT_EQ(seen, ids);
  EXPECT_EQ(seen_owner, 0);
}

constexpr char kRetireToken[] = "warehouse-retirement-test-token";

class RemoteWarehouseRetirement : public ::testing::Test {
 protected:
  RemoteWarehouseRetirement()
      : controller(std::make_shared<DockController>(testing::two_consumer_schema(),
                                                    DockControllerOptions{8})),
        service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kRetireToken}),
        remote(RpcClientOptions{service.endpoint(), kRetireToken, 10.0}) {}

  std::shared_ptr<DockController> controller;
  ControllerService service;
  RemoteController remote;
};

TEST_F(RemoteWarehouseRetirement, OwnerAndRetirementCrossTheWire) {
  TwoProducers rows(remote);
  Claim claim = remote.claim("reference", take(8));
  ASSERT_EQ(claim.rows.size(), 2u);
  std::vector<RetiredRow> lost = remote.retire_warehouse(0);
  EXPECT_EQ(ids_of(lost), (std::vector<RowId>{rows.published[0], rows.unpublished[0]}));
  EXPECT_EQ(lost[0].warehouses, std::vector<WarehouseId>{0});
  EXPECT_EQ(remote.backlog("reference").leased_rows, 1);
  EXPECT_TRUE(remote.ack(claim.lease).acknowledged);
  EXPECT_THROW(remote.allocate({row_info(1, 1, 1)}, 0.0, 0), Error);  // the error travels
  EXPECT_TRUE(remote.retire_warehouse(0).empty());
  const nlohmann::json metrics = remote.metrics();
  EXPECT_EQ(metrics["rows_lost"], 2);
  EXPECT_EQ(metrics["live_rows"], 2);
}

TEST_F(RemoteWarehouseRetirement, AllocateWithoutTheOwnerFieldIsUnowned) {
  remote.register_warehouse("");
  // The body an older client sends: f64 timeout | u32 count | infos, no owner.
  ByteWriter body;
  body.put<double>(0.0).put<uint32_t>(1);
  put_row_info(body, row_info(3, 1, 1));
  WireMessage request;
  request.op = 4;  // allocate
  request.body = body.take();
  std::vector<zmq::message_t> reply =
      testing::raw_call(service.endpoint(), encode_message(request, kRetireToken));
  ASSERT_FALSE(reply.empty());
  WireMessage answer = decode_message(reply, kRetireToken, size_t{1} << 20);
  ASSERT_EQ(answer.status, kWireOk) << error_text(answer);
  ByteReader r(answer.body);
  const std::vector<RowId> ids = r.get_vector<int64_t>();
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(remote.retire_warehouse(0).empty());  // the row has no owner to die with
  EXPECT_EQ(remote.metrics()["live_rows"], 1);
}

}  // namespace
}  // namespace aspen::dock
