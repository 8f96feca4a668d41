#include "aspen/pipeline/distributed_dock.h"

#include <cstdlib>
#include <iomanip>
#include <random>
#include <sstream>

#include "aspen/dock/zmq_transport.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {
namespace {

std::string dock_host() {
  const char* host = std::getenv("ASPEN_DOCK_HOST");
  return host != nullptr && *host != '\0' ? host : "127.0.0.1";
}

std::string random_token() {
  std::random_device device;
  std::ostringstream out;
  for (int i = 0; i < 4; ++i) out << std::hex << std::setw(8) << std::setfill('0') << device();
  return out.str();
}

}  // namespace

DistributedDock make_distributed_dock(ProcessGroupHandle& world, DockSchema schema,
                                      int64_t capacity_rows, bool write_to_rank0) {
  DistributedDock result;
  const std::string bind = "tcp://" + dock_host() + ":*";
  ZmqTransportOptions transport;
  transport.warehouse_bind = bind;
  // Whole weight sets travel through the warehouses (trainer -> rollout ranks): an
  // unsharded bf16 0.6B model is ~1.2 GB, past the 1 GiB default.
  transport.max_message_bytes = size_t{1} << 36;
  nlohmann::json where = nlohmann::json::object();
  if (world.rank() == 0) {
    ZmqServiceOptions service;
    service.bind = bind;
    service.token = random_token();
    result.controller = std::make_unique<ControllerService>(
        std::make_shared<DockController>(std::move(schema), DockControllerOptions{capacity_rows}),
        service);
    transport.controller_endpoint = result.controller->endpoint();
    transport.token = service.token;
    result.dock = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(transport));
    where = {{"endpoint", transport.controller_endpoint},
             {"token", transport.token},
             {"warehouse", result.dock->transport().local_warehouse_id()}};
  }
  broadcast_json(world, where, 0);
  if (world.rank() != 0) {
    transport.controller_endpoint = where.at("endpoint").get<std::string>();
    transport.token = where.at("token").get<std::string>();
    if (write_to_rank0) transport.write_warehouse = where.at("warehouse").get<WarehouseId>();
    result.dock = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(transport));
  }
  // Every warehouse is registered before any rank reads the endpoint list.
  world.barrier();
  return result;
}

}  // namespace aspen::pipeline
