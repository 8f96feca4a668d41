// The controller over ZeroMQ: ControllerService serves a DockController on a
// ZmqService; RemoteController implements ControllerApi by calling it. Both sides
// of every op's encoding live in controller_protocol.cpp, so they cannot drift.
// Ops (u16): 1 schema, 2 register_warehouse, 3 warehouse_endpoints, 4 allocate,
// 5 publish, 6 claim, 7 ack, 8 release, 9 metrics, 10 renew, 11 update_info,
// 12 discard, 13 retarget, 14 backlog, 15 post_status, 16 statuses,
// 17 retire_warehouse. Only metadata crosses this link: no request or reply of the
// controller carries a tensor.
// Compatibility within one wire version: allocate's body is f64 timeout | infos |
// optional i32 owner. A client sends the owner only when it has one, and the service
// reads it only when present, so an unowned allocation is understood by older and
// newer peers alike; an owned one sent to an older service is rejected (trailing
// bytes), never misread. Op 17 is unknown to an older service (an error reply).
// Blocking ops (allocate at capacity, claim waiting for min_rows) run on service
// threads (zmq_service.h), so one waiting consumer never stalls the others; ops
// 10..17 never block, the I/O thread answers them.
// Destroying a ControllerService closes its DockController (pending waits return)
// so that service threads blocked in a claim or allocation can be joined.
// Thread safety: both classes are thread-safe.
#pragma once

#include <functional>
#include <memory>

#include "aspen/dock/controller.h"
#include "aspen/dock/imports.h"
#include "aspen/dock/rpc_client.h"
#include "aspen/dock/zmq_service.h"

namespace aspen::dock {

class ControllerService {
 public:
  ControllerService(std::shared_ptr<DockController> controller, ZmqServiceOptions options);
  ~ControllerService();
  const std::string& endpoint() const { return service_->endpoint(); }
  DockController& controller() { return *controller_; }
  nlohmann::json wire_metrics() const { return service_->metrics(); }

 private:
  std::shared_ptr<DockController> controller_;
  std::unique_ptr<ZmqService> service_;
  // service_ as the I/O thread may read it while the constructor is still assigning.
  std::atomic<const ZmqService*> published_service_{nullptr};
};

// The request handler ControllerService runs: decodes an op's body, calls the
// controller and encodes the reply. Public so that the fuzz target (fuzz/) can drive
// it without sockets; wire_metrics answers op 9's "wire" field.
std::shared_ptr<ServiceHandler> make_controller_handler(
    std::shared_ptr<DockController> controller, std::function<nlohmann::json()> wire_metrics);

class RemoteController : public ControllerApi {
 public:
  // Connects and fetches the schema; throws aspen::Error if the service does not answer.
  explicit RemoteController(RpcClientOptions options);

  const DockSchema& schema() const override { return schema_; }
  WarehouseId register_warehouse(const std::string& endpoint) override;
  std::vector<std::string> warehouse_endpoints() override;
  std::vector<RowId> allocate(const std::vector<RowInfo>& rows, double timeout_s,
                              WarehouseId owner = kNoWarehouse) override;
  void publish(const std::vector<RowId>& rows, const std::vector<std::string>& columns,
               WarehouseId where, const std::vector<RowInfo>& infos = {}) override;
  Claim claim(const std::string& consumer, const ClaimOptions& options) override;
  AckResult ack(int64_t lease) override;
  bool release(int64_t lease) override;
  bool renew(int64_t lease, double lease_s) override;
  void update_info(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos) override;
  std::vector<RetiredRow> discard(const std::vector<RowId>& rows, bool unleased_only = false) override;
  std::vector<RetiredRow> retire_warehouse(WarehouseId warehouse) override;
  int64_t retarget(int32_t from, int32_t to) override;
  ConsumerBacklog backlog(const std::string& consumer) override;
  void post_status(const std::string& key, const std::string& value) override;
  std::map<std::string, StatusEntry> statuses(const std::string& prefix) override;
  // The controller's metrics plus "wire": the service's request and byte counters.
  nlohmann::json metrics() override;

 private:
  RpcClient client_;
  DockSchema schema_;
};

}  // namespace aspen::dock
