// ZmqTransport: the cross-process DockTransport. The controller is remote
// (RemoteController); this process keeps its own Warehouse in memory, writes to it
// without a copy, and serves it to other processes with a WarehouseService bound to
// loopback, registered with the controller. Other warehouses are reached with
// RemoteWarehouse clients, created on first use from the controller's endpoint list.
// Central mode (write_warehouse >= 0): no local warehouse; every write goes to that
// remote warehouse, i.e. the conventional single replay buffer, for comparison.
// reader_only: a pure consumer that serves nothing (no socket bound).
// Thread safety: thread-safe. Locking: mutex_ guards remotes_ and endpoints_.
#pragma once

#include <map>
#include <memory>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/imports.h"
#include "aspen/dock/warehouse_protocol.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

struct ZmqTransportOptions {
  std::string controller_endpoint;
  std::string token;
  std::string warehouse_bind = "tcp://127.0.0.1:*";
  WarehouseId write_warehouse = kNoWarehouse;  // >= 0: central mode, see above
  bool reader_only = false;  // no local warehouse (a pure consumer); writes are errors
  double rpc_timeout_s = 30.0;
  size_t max_message_bytes = size_t{1} << 30;
};

class ZmqTransport : public DockTransport {
 public:
  explicit ZmqTransport(ZmqTransportOptions options);

  ControllerApi& controller() override { return *controller_; }
  WarehouseId local_warehouse_id() const override { return local_id_; }
  WarehouseApi& local_warehouse() override;
  WarehouseApi& warehouse(WarehouseId id) override;
  // The in-memory warehouse of this process (null in central mode).
  const std::shared_ptr<Warehouse>& local_store() const { return local_; }
  // Wire counters of this process's warehouse service (empty in central mode).
  nlohmann::json warehouse_wire_metrics() const;

 private:
  RpcClientOptions client_options(const std::string& endpoint) const;

  const ZmqTransportOptions options_;
  std::unique_ptr<RemoteController> controller_;
  std::shared_ptr<Warehouse> local_;
  std::unique_ptr<WarehouseService> service_;
  WarehouseId local_id_ = kNoWarehouse;
  Mutex mutex_;
  std::vector<std::string> endpoints_ GUARDED_BY(mutex_);
  std::map<WarehouseId, std::unique_ptr<RemoteWarehouse>> remotes_ GUARDED_BY(mutex_);
};

}  // namespace aspen::dock
