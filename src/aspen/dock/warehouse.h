// Warehouse: the data half of a TransferDock on one process/node. It stores the
// column tensors of rows written locally and serves them to readers the controller
// pointed here. Tensors are stored and returned by reference (no copy in-process);
// writers must not modify a tensor in place after putting it.
// It also holds the weights its owner publishes (a WeightBoard, with the deltas that
// led to them): latest_weights() and weight_update() hand out the published sets and
// deltas themselves, so an in-process reader shares their tensors.
// Metrics: bytes stored (put), bytes served (get), rows and bytes held now (back to
// 0 once every row put here is erased), weights version.
// Thread safety: all methods are thread-safe. Locking: mutex_ guards cells_ and the
// byte counters; weights_ is thread-safe on its own (not under mutex_).
#pragma once

#include <map>
#include <unordered_map>

#include "aspen/dock/dock_api.h"
#include "aspen/dock/imports.h"
#include "aspen/dock/weight_board.h"
#include "aspen/parallel/weight_set.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

class Warehouse : public WarehouseApi {
 public:
  void put(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns) override;
  std::vector<ColumnData> get(const std::vector<RowId>& rows,
                              const std::vector<std::string>& columns) override;
  void erase(const std::vector<RowId>& rows) override;
  void publish_weights(std::shared_ptr<const WeightSet> weights) override;
  std::shared_ptr<const WeightSet> latest_weights(int64_t newer_than) override;
  void publish_weight_delta(std::shared_ptr<const WeightSet> weights,
                            std::shared_ptr<const WeightDelta> delta) override;
  WeightUpdate weight_update(int64_t held) override;
  nlohmann::json metrics() override;
  int64_t rows_held();

 private:
  Mutex mutex_;
  std::unordered_map<RowId, std::map<std::string, torch::Tensor>> cells_ GUARDED_BY(mutex_);
  int64_t bytes_in_ GUARDED_BY(mutex_) = 0;
  int64_t bytes_out_ GUARDED_BY(mutex_) = 0;
  int64_t bytes_held_ GUARDED_BY(mutex_) = 0;
  WeightBoard weights_;
};

}  // namespace aspen::dock
