#include "aspen/dock/in_process_transport.h"

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {

InProcessDock::InProcessDock(DockSchema schema, DockControllerOptions options, int warehouses)
    : controller(std::make_shared<DockController>(std::move(schema), options)) {
  check_input(warehouses >= 1, "in-process dock with " + std::to_string(warehouses) + " warehouses",
              "in-process dock", "use at least 1");
  for (int i = 0; i < warehouses; ++i) {
    this->warehouses.push_back(std::make_shared<Warehouse>());
    controller->register_warehouse("");
  }
}

InProcessTransport::InProcessTransport(std::shared_ptr<InProcessDock> dock, WarehouseId local)
    : dock_(std::move(dock)), local_(local) {
  check_input(local_ >= 0 && local_ < static_cast<WarehouseId>(dock_->warehouses.size()),
              "local warehouse " + std::to_string(local_) + " does not exist",
              "in-process transport");
}

WarehouseApi& InProcessTransport::warehouse(WarehouseId id) {
  check_input(id >= 0 && id < static_cast<WarehouseId>(dock_->warehouses.size()),
              "warehouse " + std::to_string(id) + " does not exist", "in-process transport");
  return *dock_->warehouses[id];
}

}  // namespace aspen::dock
