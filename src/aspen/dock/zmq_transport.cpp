#include "aspen/dock/zmq_transport.h"

#include "aspen/dock/imports.h"

namespace aspen::dock {

ZmqTransport::ZmqTransport(ZmqTransportOptions options) : options_(std::move(options)) {
  controller_ = std::make_unique<RemoteController>(client_options(options_.controller_endpoint));
  if (options_.reader_only) return;
  if (options_.write_warehouse != kNoWarehouse) {
    local_id_ = options_.write_warehouse;
    return;
  }
  local_ = std::make_shared<Warehouse>();
  service_ = std::make_unique<WarehouseService>(
      local_,
      ZmqServiceOptions{options_.warehouse_bind, options_.token, options_.max_message_bytes});
  local_id_ = controller_->register_warehouse(service_->endpoint());
}

RpcClientOptions ZmqTransport::client_options(const std::string& endpoint) const {
  return RpcClientOptions{endpoint, options_.token, options_.rpc_timeout_s,
                          options_.max_message_bytes};
}

WarehouseApi& ZmqTransport::local_warehouse() {
  if (local_) return *local_;
  check_input(!options_.reader_only, "a reader-only dock client cannot write", "dock put",
              "connect without reader_only to produce rows");
  return warehouse(local_id_);
}

WarehouseApi& ZmqTransport::warehouse(WarehouseId id) {
  if (local_ && id == local_id_) return *local_;
  MutexLock lock(mutex_);
  auto it = remotes_.find(id);
  if (it != remotes_.end()) return *it->second;
  if (id < 0 || id >= static_cast<WarehouseId>(endpoints_.size())) {
    endpoints_ = controller_->warehouse_endpoints();  // a warehouse registered since
  }
  check_input(
      id >= 0 && id < static_cast<WarehouseId>(endpoints_.size()) && !endpoints_[id].empty(),
      "warehouse " + std::to_string(id) + " has no endpoint", "dock transport");
  auto remote = std::make_unique<RemoteWarehouse>(client_options(endpoints_[id]));
  return *remotes_.emplace(id, std::move(remote)).first->second;
}

nlohmann::json ZmqTransport::warehouse_wire_metrics() const {
  return service_ ? service_->wire_metrics() : nlohmann::json::object();
}

}  // namespace aspen::dock
