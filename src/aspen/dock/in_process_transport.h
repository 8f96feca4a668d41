// InProcessTransport: every role is a thread of one process; the controller and the
// warehouses are plain objects and tensors move by reference (zero copy). Each
// producer/consumer thread that models a separate node gets its own transport view
// with its own local warehouse (see for_warehouse()).
// Thread safety: the objects it points to are thread-safe; the view is immutable.
#pragma once

#include <memory>

#include "aspen/dock/controller.h"
#include "aspen/dock/imports.h"
#include "aspen/dock/warehouse.h"

namespace aspen::dock {

// The shared state of an in-process dock: one controller, n registered warehouses.
struct InProcessDock {
  InProcessDock(DockSchema schema, DockControllerOptions options, int warehouses);
  std::shared_ptr<DockController> controller;
  std::vector<std::shared_ptr<Warehouse>> warehouses;  // index = WarehouseId
};

class InProcessTransport : public DockTransport {
 public:
  // A view of `dock` whose local warehouse is `local` (0 <= local < warehouses).
  InProcessTransport(std::shared_ptr<InProcessDock> dock, WarehouseId local);

  ControllerApi& controller() override { return *dock_->controller; }
  WarehouseId local_warehouse_id() const override { return local_; }
  WarehouseApi& local_warehouse() override { return *dock_->warehouses[local_]; }
  WarehouseApi& warehouse(WarehouseId id) override;

 private:
  std::shared_ptr<InProcessDock> dock_;
  WarehouseId local_;
};

}  // namespace aspen::dock
