#include "aspen/dock/warehouse.h"

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0;
}

}  // namespace

void Warehouse::put(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns) {
  for (const ColumnData& column : columns) {
    check_input(column.values.size() == rows.size(),
                "column '" + column.name + "' has " + std::to_string(column.values.size()) +
                    " values for " + std::to_string(rows.size()) + " rows",
                "warehouse put");
  }
  MutexLock lock(mutex_);
  for (size_t i = 0; i < rows.size(); ++i) {
    auto& cells = cells_[rows[i]];
    for (const ColumnData& column : columns) {
      torch::Tensor& cell = cells[column.name];
      bytes_held_ += tensor_bytes(column.values[i]) - tensor_bytes(cell);  // a put may replace
      cell = column.values[i];
      bytes_in_ += tensor_bytes(column.values[i]);
    }
  }
}

std::vector<ColumnData> Warehouse::get(const std::vector<RowId>& rows,
                                       const std::vector<std::string>& columns) {
  std::vector<ColumnData> out;
  for (const std::string& name : columns) out.push_back(ColumnData{name, {}});
  MutexLock lock(mutex_);
  for (RowId id : rows) {
    auto row = cells_.find(id);
    check_input(row != cells_.end(), "row " + std::to_string(id) + " is not in this warehouse",
                "warehouse get", "ask the controller where the row lives");
    for (ColumnData& column : out) {
      auto cell = row->second.find(column.name);
      check_input(cell != row->second.end(),
                  "row " + std::to_string(id) + " has no column '" + column.name + "' here",
                  "warehouse get");
      column.values.push_back(cell->second);
      bytes_out_ += tensor_bytes(cell->second);
    }
  }
  return out;
}

void Warehouse::erase(const std::vector<RowId>& rows) {
  MutexLock lock(mutex_);
  for (RowId id : rows) {
    auto row = cells_.find(id);
    if (row == cells_.end()) continue;
    for (const auto& [name, tensor] : row->second) bytes_held_ -= tensor_bytes(tensor);
    cells_.erase(row);
  }
}

void Warehouse::publish_weights(std::shared_ptr<const WeightSet> weights) {
  check_input(weights != nullptr, "no weights", "warehouse publish_weights");
  weights_.publish(std::move(weights));
}

std::shared_ptr<const WeightSet> Warehouse::latest_weights(int64_t newer_than) {
  std::shared_ptr<const WeightSet> latest = weights_.latest();
  if (latest == nullptr || latest->version <= newer_than) return nullptr;
  return latest;
}

void Warehouse::publish_weight_delta(std::shared_ptr<const WeightSet> weights,
                                     std::shared_ptr<const WeightDelta> delta) {
  weights_.publish(std::move(weights), std::move(delta));
}

WeightUpdate Warehouse::weight_update(int64_t held) { return weights_.update(held); }

int64_t Warehouse::rows_held() {
  MutexLock lock(mutex_);
  return static_cast<int64_t>(cells_.size());
}

nlohmann::json Warehouse::metrics() {
  std::shared_ptr<const WeightSet> weights = weights_.latest();
  MutexLock lock(mutex_);
  return {{"rows_held", cells_.size()},
          {"bytes_held", bytes_held_},
          {"bytes_in", bytes_in_},
          {"bytes_out", bytes_out_},
          {"weights_version", weights != nullptr ? weights->version : int64_t{-1}},
          {"weight_deltas_held", weights_.deltas_held()}};
}

}  // namespace aspen::dock
