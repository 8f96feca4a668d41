// The controller's upkeep ops (10..16) and the warehouse's weights ops (36, 37) over
// ZeroMQ on loopback, in one process: what a RemoteController / RemoteWarehouse
// answers equals what the in-process objects would (weight deltas applied after the
// wire give the published set bit for bit), claim options with a target and
// a required window survive the wire, and a TransferDock that discards rows frees
// their data in the warehouse of the process that wrote them.
#include <gtest/gtest.h>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/zmq_transport.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

using testing::row_info;

constexpr char kUpkeepToken[] = "upkeep-wire-test-token";

class UpkeepWireTest : public ::testing::Test {
 protected:
  UpkeepWireTest()
      : controller(std::make_shared<DockController>(testing::two_consumer_schema(),
                                                    DockControllerOptions{16})),
        service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kUpkeepToken}),
        remote(RpcClientOptions{service.endpoint(), kUpkeepToken, 10.0}) {}

  ZmqTransportOptions transport_options(bool reader_only = false) const {
    ZmqTransportOptions options;
    options.controller_endpoint = service.endpoint();
    options.token = kUpkeepToken;
    options.rpc_timeout_s = 10.0;
    options.reader_only = reader_only;
    return options;
  }

  std::shared_ptr<DockController> controller;
  ControllerService service;
  RemoteController remote;
};

TEST_F(UpkeepWireTest, TargetAndRequiredWindowClaimOptionsCrossTheWire) {
  remote.register_warehouse("");
  std::vector<RowId> ids = remote.allocate({row_info(1, 2, 3, 0, 4), row_info(1, 2, 3, 0, 4),
                                            row_info(2, 2, 3, 1), row_info(2, 2, 3, 1)},
                                           1.0);
  remote.publish(ids, {"tokens"}, 0);  // ready for the reference, pending for the actor
  ClaimOptions window;
  window.whole_groups = true;
  window.max_rows = 4;
  window.required_through_version = 1;
  window.complete_window = false;
  window.min_rows = 0;
  Claim pending = remote.claim("actor", window);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(pending.pending_required_rows, 4);

  window.target = 5;  // group 1 went to instance 4: not this claim's, so not required of it
  window.complete_window = true;
  Claim part = remote.claim("reference", window);
  ASSERT_EQ(part.rows.size(), 2u);
  EXPECT_EQ(part.rows[0].info.group_id, 2);
  EXPECT_EQ(part.pending_required_rows, 0);
  window.target = 4;
  Claim dispatched = remote.claim("reference", window);
  ASSERT_EQ(dispatched.rows.size(), 2u);
  EXPECT_EQ(dispatched.rows[0].info.target, 4);
}

TEST_F(UpkeepWireTest, LeaseInfoDispatchBacklogAndStatusOpsRoundTrip) {
  remote.register_warehouse("");
  std::vector<RowId> ids = remote.allocate(
      {row_info(1, 2, 3, 0, 4), row_info(1, 2, 3, 0, 4), row_info(2, 1, 3), row_info(3, 1, 3)},
      1.0);
  remote.publish(ids, {"tokens", "reward"}, 0);

  remote.update_info({ids[0], ids[1]}, {row_info(1, 2, 7, 3, 4), row_info(1, 2, 8, 3, 4)});
  EXPECT_THROW(remote.update_info({ids[0]}, {row_info(9, 2, 7, 3, 4)}), Error);  // group moved
  EXPECT_EQ(remote.retarget(4, 6), 2);

  ClaimOptions mine;
  mine.target = 6;
  mine.max_rows = 8;
  mine.whole_groups = true;
  mine.groups = {1};
  const Claim claim = remote.claim("actor", mine);
  ASSERT_EQ(claim.rows.size(), 2u);
  EXPECT_EQ(claim.rows[0].info.target, 6);
  EXPECT_EQ(claim.rows[0].info.version, 3);
  EXPECT_EQ(claim.rows[1].info.tokens, 8);
  EXPECT_TRUE(remote.renew(claim.lease, 30.0));
  EXPECT_FALSE(remote.renew(claim.lease + 100, 30.0));

  const ConsumerBacklog backlog = remote.backlog("actor");
  EXPECT_EQ(backlog.rows, 2);
  EXPECT_EQ(backlog.groups, 2);
  EXPECT_EQ(backlog.ready_rows, 2);
  EXPECT_EQ(backlog.leased_rows, 2);

  const std::vector<RetiredRow> discarded = remote.discard({ids[2], 777});
  ASSERT_EQ(discarded.size(), 1u);
  EXPECT_EQ(discarded[0].id, ids[2]);
  EXPECT_EQ(discarded[0].warehouses, (std::vector<WarehouseId>{0}));
  EXPECT_EQ(remote.backlog("actor").rows, 1);

  remote.post_status("instance/0", R"({"queued": 2})");
  remote.post_status("instance/1", "idle");
  remote.post_status("policy", "3");
  const std::map<std::string, StatusEntry> instances = remote.statuses("instance/");
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances.at("instance/0").value, R"({"queued": 2})");
  EXPECT_EQ(instances.at("instance/1").value, "idle");
  EXPECT_GE(instances.at("instance/1").age_s, 0.0);
  EXPECT_EQ(remote.statuses("").size(), 3u);
}

TEST_F(UpkeepWireTest, WeightsPublishedByOneProcessAreFetchedFromItsWarehouse) {
  TransferDock trainer(std::make_shared<ZmqTransport>(transport_options()));
  TransferDock rollout(std::make_shared<ZmqTransport>(transport_options(/*reader_only=*/true)));
  const WarehouseId where = trainer.transport().local_warehouse_id();
  EXPECT_EQ(rollout.latest_weights(where, -1), nullptr);  // nothing published yet

  auto weights = std::make_shared<WeightSet>();
  weights->version = 3;
  weights->tp_rank = 1;
  weights->tp_size = 2;
  weights->tensors = {{"model.embed_tokens.weight", torch::randn({4, 3}).to(torch::kBFloat16)},
                      {"lm_head.bias", torch::arange(5, torch::kFloat32)}};
  trainer.publish_weights(weights);
  EXPECT_EQ(trainer.latest_weights(where, -1).get(), weights.get());  // in-process: the set

  std::shared_ptr<const WeightSet> fetched = rollout.latest_weights(where, 2);
  ASSERT_NE(fetched, nullptr);
  EXPECT_EQ(fetched->version, 3);
  EXPECT_EQ(fetched->tp_rank, 1);
  EXPECT_EQ(fetched->tp_size, 2);
  ASSERT_EQ(fetched->tensors.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(fetched->tensors[i].first, weights->tensors[i].first);
    EXPECT_EQ(fetched->tensors[i].second.scalar_type(), weights->tensors[i].second.scalar_type());
    EXPECT_TRUE(torch::equal(fetched->tensors[i].second, weights->tensors[i].second));
  }
  EXPECT_EQ(rollout.latest_weights(where, 3), nullptr);  // not newer than what it has
  // Only the owning process publishes: through the wire it is an error.
  EXPECT_THROW(rollout.transport().warehouse(where).publish_weights(weights), Error);
}

TEST_F(UpkeepWireTest, WeightUpdatesCrossTheWireAsDeltasOrTheFullSet) {
  TransferDock trainer(std::make_shared<ZmqTransport>(transport_options()));
  TransferDock rollout(std::make_shared<ZmqTransport>(transport_options(/*reader_only=*/true)));
  const WarehouseId where = trainer.transport().local_warehouse_id();
  EXPECT_TRUE(rollout.weight_update(where, -1).empty());

  torch::manual_seed(2);
  std::vector<std::shared_ptr<const WeightSet>> sets;
  torch::Tensor w = torch::randn({128, 32}) * 0.02;
  for (int v = 1; v <= 3; ++v) {
    auto set = std::make_shared<WeightSet>();
    set->version = v;
    set->tensors = {{"w", w.clone()}, {"noise", torch::randint(0, 1 << 30, {64}, torch::kInt32)}};
    sets.push_back(set);
    w = w + torch::randn_like(w) * 1e-6;
  }
  trainer.publish_weights(sets[0]);
  for (int v = 1; v < 3; ++v) {
    trainer.publish_weights(sets[v], std::make_shared<WeightDelta>(
                                         *encode_weight_delta(*sets[v - 1], *sets[v])));
  }
  auto expect_newest = [&](const std::shared_ptr<const WeightSet>& got) {
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->version, 3);
    ASSERT_EQ(got->tensors.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got->tensors[i].first, sets[2]->tensors[i].first);
      EXPECT_TRUE(torch::equal(got->tensors[i].second, sets[2]->tensors[i].second));
    }
  };
  const WeightUpdate full = rollout.weight_update(where, -1);
  ASSERT_NE(full.full, nullptr);
  EXPECT_TRUE(full.deltas.empty());
  expect_newest(apply_weight_update(full, {}));

  const WeightUpdate deltas = rollout.weight_update(where, 1);  // skipped version 2
  EXPECT_EQ(deltas.full, nullptr);
  ASSERT_EQ(deltas.deltas.size(), 2u);
  EXPECT_EQ(deltas.deltas[1]->tensors[1].coding, DeltaCoding::kRaw);  // the noise
  EXPECT_LT(deltas.bytes(), 2 * sets[2]->bytes());
  expect_newest(apply_weight_update(
      deltas, std::map<std::string, torch::Tensor>(sets[0]->tensors.begin(), sets[0]->tensors.end())));
  EXPECT_TRUE(rollout.weight_update(where, 3).empty());
  EXPECT_THROW(rollout.transport().warehouse(where).publish_weight_delta(sets[2], deltas.deltas[1]),
               Error);
}

TEST_F(UpkeepWireTest, DiscardThroughTheDockFreesTheDataWhereItWasWritten) {
  auto producer_transport = std::make_shared<ZmqTransport>(transport_options());
  TransferDock producer(producer_transport);
  TransferDock trainer(std::make_shared<ZmqTransport>(transport_options(/*reader_only=*/true)));
  std::vector<RowInfo> infos(2, row_info(5, 2, 3));
  std::vector<RowId> ids = producer.put(infos, testing::columns_for(infos, {1, 2}));
  ASSERT_EQ(producer_transport->local_store()->rows_held(), 2);

  ClaimOptions both;
  both.max_rows = 2;
  const Claim claim = trainer.claim("actor", both);
  ASSERT_EQ(claim.rows.size(), 2u);
  EXPECT_TRUE(trainer.renew(claim, 30.0));
  EXPECT_EQ(trainer.discard(ids).size(), 2u);  // e.g. a group whose rewards are all equal
  EXPECT_EQ(producer_transport->local_store()->rows_held(), 0);
  EXPECT_TRUE(trainer.ack(claim));  // the lease stays valid without its rows
  EXPECT_EQ(trainer.backlog("reference").rows, 0);
  trainer.post_status("trainer", "step 1");
  EXPECT_EQ(producer.statuses("trainer").at("trainer").value, "step 1");
}

}  // namespace
}  // namespace aspen::dock
