// A warehouse over ZeroMQ: WarehouseService serves a Warehouse on a ZmqService;
// RemoteWarehouse implements WarehouseApi by calling it. Encodings of both sides
// live in warehouse_protocol.cpp.
// Ops (u16): 32 put, 33 get, 34 erase, 35 metrics, 36 weights, 37 weight update.
// put/get bodies carry
// the row ids and column names; the tensors follow as tensor frames, column-major
// (all rows of the first column, then the next column), see wire_format.h.
// weights: request body i64 newer_than; reply body u8 found | i64 version |
// i32 tp_rank | i32 tp_size | tensor names, then one tensor frame per name (none
// when not found). weight update: request body i64 held; reply body u8 kind (0 none,
// 1 full, 2 deltas), then for full the weights reply's fields after `found`, for
// deltas u32 count and per delta i64 from_version | i64 to_version | tensor names |
// u8 codings; the payloads follow as tensor frames, delta after delta. Weights are
// published only by the process owning the warehouse: RemoteWarehouse::publish_weights
// and publish_weight_delta throw aspen::Error.
// Thread safety: both classes are thread-safe.
#pragma once

#include <memory>

#include "aspen/dock/imports.h"
#include "aspen/dock/rpc_client.h"
#include "aspen/dock/warehouse.h"
#include "aspen/dock/zmq_service.h"

namespace aspen::dock {

class WarehouseService {
 public:
  WarehouseService(std::shared_ptr<Warehouse> warehouse, ZmqServiceOptions options);
  const std::string& endpoint() const { return service_->endpoint(); }
  nlohmann::json wire_metrics() const { return service_->metrics(); }

 private:
  std::unique_ptr<ZmqService> service_;
};

// The request handler WarehouseService runs (public for the fuzz target, fuzz/).
std::shared_ptr<ServiceHandler> make_warehouse_handler(std::shared_ptr<Warehouse> warehouse);

class RemoteWarehouse : public WarehouseApi {
 public:
  explicit RemoteWarehouse(RpcClientOptions options) : client_(std::move(options)) {}
  void put(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns) override;
  std::vector<ColumnData> get(const std::vector<RowId>& rows,
                              const std::vector<std::string>& columns) override;
  void erase(const std::vector<RowId>& rows) override;
  void publish_weights(std::shared_ptr<const WeightSet> weights) override;
  // A copy received over the wire (the tensors hold the received frames).
  std::shared_ptr<const WeightSet> latest_weights(int64_t newer_than) override;
  void publish_weight_delta(std::shared_ptr<const WeightSet> weights,
                            std::shared_ptr<const WeightDelta> delta) override;
  // A copy received over the wire, as latest_weights.
  WeightUpdate weight_update(int64_t held) override;
  nlohmann::json metrics() override;

 private:
  RpcClient client_;
};

}  // namespace aspen::dock
